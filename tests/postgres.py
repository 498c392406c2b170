"""A real PostgreSQL 15 for the tests, started in a temporary folder (`initdb`, `pg_ctl`) and listening on a Unix
socket there only; each test gets a database of its own (`PostgresServer.database()`). Debian's `postgresql`
package puts the programs under /usr/lib/postgresql/15/bin (`.ci/run` installs it where missing); without them the
PostgreSQL cases skip and say so."""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import urllib.parse
from pathlib import Path

BIN = Path(os.environ.get("PIER_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
MISSING = (f"PostgreSQL's programs are not at {BIN} (initdb, pg_ctl): install Debian's package "
           "(apt-get install -y postgresql), as .ci/run does, to run the PostgreSQL cases")


def available() -> bool:
    return (BIN / "initdb").is_file() and (BIN / "pg_ctl").is_file()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One server for the test session. PostgreSQL refuses to run as root: under root it runs as the `postgres`
    user the package makes, in a folder that user owns."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="pier-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()
        self._user = "postgres" if os.geteuid() == 0 else None
        if self._user is not None:
            account = pwd.getpwnam(self._user)
            os.chown(self.folder, account.pw_uid, account.pw_gid)
        self._names = itertools.count(1)
        self._run(BIN / "initdb", "-D", self.data, "-U", "pier", "--auth=trust", "-E", "UTF8", "--no-sync",
                  "--locale=C.UTF-8")
        self.start()

    def start(self) -> None:
        """The server started (again, after `halt`), on the same socket: its databases as they were."""
        self._run(BIN / "pg_ctl", "start", "-w", "-D", self.data, "-l", self.folder / "log",
                  "-o", f"-k {self.folder} -p {self.port} -c listen_addresses='' -c fsync=off "
                        "-c max_connections=200")

    def halt(self) -> None:
        """The server stopped as a restart stops it (every connection closed, open transactions undone)."""
        self._run(BIN / "pg_ctl", "stop", "-w", "-D", self.data, "-m", "fast")

    def terminate(self, database: str) -> int:
        """Every connection to `database` (a URL of `database()`) but this one dropped, as
        `pg_terminate_backend` drops them; how many."""
        import psycopg

        name = urllib.parse.urlsplit(database).path.lstrip("/")
        with psycopg.connect(self.url(), autocommit=True) as conn:
            rows = conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND "
                                "pid <> pg_backend_pid()", (name,)).fetchall()
        return sum(1 for (done,) in rows if done)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://pier@/{database}?host={self.folder}&port={self.port}"

    def database(self) -> str:
        """A new, empty database's URL."""
        import psycopg

        name = f"test_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run(BIN / "pg_ctl", "stop", "-D", self.data, "-m", "immediate")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _run(self, *command: object) -> None:
        done = subprocess.run([str(c) for c in command], user=self._user, capture_output=True, text=True,
                              cwd=self.folder, check=False, timeout=120)
        if done.returncode != 0:
            log = self.folder / "log"
            raise RuntimeError(f"{command[0]} failed ({done.returncode}): {done.stdout}{done.stderr}"
                               + (log.read_text() if log.is_file() else ""))
