"""Backups of the state file, restoring one, and checking a state file: what `pier state` and the gateway's
backup schedule do.

    <state_dir>/state.sqlite3                      the state (state.py)
    <state_dir>/backups/state-<UTC time>.sqlite3   generations made with SQLite's online backup, newest last
    <state_dir>/gateway.lock                       held (flock) by the `pier up` that uses this folder

A backup is made from its own read-only connection while the gateway keeps writing (WAL lets both go on),
checked with SQLite's quick check before it takes its name, and only then may an old generation go: a damaged
file never pushes a good backup out. `restore()` moves the state file (and its log) aside before the backup
takes its place, and refuses while a gateway holds the folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from pier.control.state import (
    BACKUPS,
    FILE_MODE,
    SCHEMA_VERSION,
    SIDE_FILES,
    STATE_FILE,
    TABLES,
    BadRow,
    State,
    StateError,
    damage_advice,
    private_dir,
    read_row,
)

log = logging.getLogger("pier.control")

LOCK_FILE = "gateway.lock"
DEFAULT_EVERY_S = 15 * 60.0
DEFAULT_KEEP = 5


@dataclass(frozen=True)
class BackupPolicy:
    every_s: float = DEFAULT_EVERY_S  # how often the gateway backs its state up (when it changed)
    keep: int = DEFAULT_KEEP  # generations kept under <state_dir>/backups

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> BackupPolicy:
        """PIER_STATE_BACKUP_MINUTES and PIER_STATE_BACKUPS, when set."""
        env = dict(os.environ) if env is None else env
        every = _positive(env, "PIER_STATE_BACKUP_MINUTES", float, DEFAULT_EVERY_S / 60) * 60
        return cls(every_s=every, keep=int(_positive(env, "PIER_STATE_BACKUPS", int, DEFAULT_KEEP)))


def _positive(env: dict[str, str], name: str, kind: type[float] | type[int], default: float) -> float:
    text = env.get(name)
    if not text:
        return default
    try:
        value = kind(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise StateError(f"{name}={text!r} is not a positive number; unset it for the default ({default:g}).")
    return value


# ---- making and listing backups


def backups_dir(state_dir: Path) -> Path:
    return state_dir / BACKUPS


def list_backups(state_dir: Path) -> list[Path]:
    """Every backup generation, oldest first."""
    return sorted(backups_dir(state_dir).glob("state-*.sqlite3"))


def backup(state_path: Path, keep: int = DEFAULT_KEEP, *, now: float | None = None) -> Path:
    """A checked copy of the state file as it is now, among the newest `keep` generations under its folder's
    backups/ (older ones are removed once the new one is in place). Safe while a gateway writes."""
    folder = backups_dir(state_path.parent)
    private_dir(folder)
    stamp = datetime.fromtimestamp(time.time() if now is None else now, UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    final = folder / f"state-{stamp}.sqlite3"
    scratch = folder / f".{final.name}.new"
    _copy_database(state_path, scratch)
    os.replace(scratch, final)
    for old in list_backups(state_path.parent)[:-keep]:
        old.unlink(missing_ok=True)
    return final


def _copy_database(source: Path, dest: Path) -> None:
    """SQLite's online backup of `source` into a new file `dest` (0600), checked before it is kept."""
    for suffix in ("", *SIDE_FILES):
        Path(f"{dest}{suffix}").unlink(missing_ok=True)
    os.close(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    try:
        with contextlib.closing(_read_only(source)) as src, contextlib.closing(sqlite3.connect(dest)) as copy:
            src.backup(copy)
            copy.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
            problems = _quick_check(copy)
            if problems:
                raise StateError(f"The backup of {source} does not pass SQLite's quick check ({problems}); "
                                 "the state itself may be damaged: run pier state check.")
        with open(dest, "rb+") as file:
            os.fsync(file.fileno())
    except BaseException:
        dest.unlink(missing_ok=True)
        raise


def _read_only(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise StateError(f"There is no state file at {path}.")
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10.0)


def _quick_check(db: sqlite3.Connection) -> str:
    problems = [str(row[0]) for row in db.execute("PRAGMA quick_check(5)").fetchall()]
    return "" if problems == ["ok"] else "; ".join(problems)


class Backups:
    """The gateway's schedule: a generation when the gateway starts with none, then every `every_s` when the
    state changed since the last one, and a last one on the way out."""

    def __init__(self, state: State, policy: BackupPolicy | None = None) -> None:
        self.state = state
        self.policy = policy or BackupPolicy()
        self._saved = 0  # State.changes at the last backup (none since it opened)

    def due(self, *, starting: bool = False) -> bool:
        """When there is no backup, when the state changed since the last one, and, as the gateway starts, when
        the file is newer than the newest backup (an earlier gateway may have ended without its last one)."""
        made = list_backups(self.state.path.parent)
        if not made or self.state.changes != self._saved:
            return True
        if not starting:
            return False
        written = max((Path(f"{self.state.path}{s}").stat().st_mtime for s in ("", "-wal")
                       if Path(f"{self.state.path}{s}").exists()), default=0.0)
        return written > made[-1].stat().st_mtime

    def take(self, *, starting: bool = False) -> Path | None:
        """A backup now if one is due (blocking: run it on a thread). Failures are logged, never raised: the
        gateway goes on serving, and the next tick tries again."""
        if not self.due(starting=starting):
            return None
        changes = self.state.changes
        try:
            made = backup(self.state.path, self.policy.keep)
        except (OSError, sqlite3.Error, StateError) as error:
            log.error("could not back up %s: %s", self.state.path, getattr(error, "message", error))
            return None
        self._saved = changes
        log.info("state backed up to %s", made)
        return made

    async def run(self) -> None:
        await asyncio.to_thread(lambda: self.take(starting=True))
        while True:
            await asyncio.sleep(self.policy.every_s)
            await asyncio.to_thread(self.take)


# ---- restoring


@dataclass(frozen=True)
class Restored:
    backup: Path
    state: Path
    moved: tuple[Path, ...]  # what was in the way, and where it went


def restore(state_dir: Path, chosen: Path | None = None, *, now: float | None = None) -> Restored:
    """Put a backup (the newest that passes SQLite's quick check, or `chosen`) in place of the state file,
    after moving the current file and its log aside. Refused while a gateway uses the folder."""
    holder = lock_holder(state_dir)
    if holder is not None:
        raise StateError(f"A pier gateway (pid {holder}) is using {state_dir}: stop it first, then restore.")
    source = _choose(state_dir, chosen)
    state = state_dir / STATE_FILE
    stamp = datetime.fromtimestamp(time.time() if now is None else now, UTC).strftime("%Y%m%dT%H%M%SZ")
    scratch = state_dir / f".{STATE_FILE}.restoring"
    _copy_database(source, scratch)  # checked before anything of the current state moves
    moved = []
    for suffix in ("", *SIDE_FILES):
        current = Path(f"{state}{suffix}")
        if current.exists():
            aside = Path(f"{state}.before-restore-{stamp}{suffix}")
            os.replace(current, aside)
            moved.append(aside)
    os.replace(scratch, state)
    return Restored(source, state, tuple(moved))


def _choose(state_dir: Path, chosen: Path | None) -> Path:
    if chosen is not None:
        path = chosen if chosen.exists() else backups_dir(state_dir) / chosen
        if not path.is_file():
            known = ", ".join(p.name for p in list_backups(state_dir)) or "none"
            raise StateError(f"No backup {chosen}; the backups under {backups_dir(state_dir)} are: {known}.")
        problem = backup_problem(path)
        if problem:
            raise StateError(f"{path} cannot be restored: {problem}.")
        return path
    tried = []
    for candidate in reversed(list_backups(state_dir)):
        problem = backup_problem(candidate)
        if not problem:
            return candidate
        tried.append(f"{candidate.name}: {problem}")
    if not tried:
        raise StateError(f"There is no backup under {backups_dir(state_dir)}. Move the damaged state file aside "
                         f"instead: mv {state_dir / STATE_FILE} {state_dir / STATE_FILE}.damaged")
    raise StateError("No backup can be restored: " + "; ".join(tried) + ".")


def backup_problem(path: Path) -> str:
    """Why the backup at `path` cannot be restored ("" when it can)."""
    try:
        with contextlib.closing(_read_only(path)) as db:
            problems = _quick_check(db)
            version = db.execute("PRAGMA user_version").fetchone()[0]
    except (sqlite3.Error, StateError) as error:
        return str(getattr(error, "message", error))
    if problems:
        return f"SQLite's quick check found {problems}"
    if version > SCHEMA_VERSION:
        return f"it was written by a newer pier (state schema {version})"
    return ""


# ---- checking


@dataclass
class Report:
    path: Path
    problems: list[str] = field(default_factory=list)  # what makes the file unusable
    records: dict[str, int] = field(default_factory=dict)  # table -> records that read
    unreadable: list[BadRow] = field(default_factory=list)
    version: int | None = None
    backups: list[Path] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.unreadable

    def advice(self) -> str:
        if self.problems:
            return damage_advice(self.path)
        if self.unreadable:
            return ("The database is sound; only the records above do not read. Delete each (pier delete, or the "
                    "SageMaker Delete* call) and create it again, or restore a backup: pier state restore "
                    f"--state-dir {self.path.parent}")
        return ""


def check(state_dir: Path) -> Report:
    """Everything `pier state check` reports: SQLite's full integrity check, the schema version, and every
    record read as the gateway reads it. Reads only; works while a gateway runs."""
    path = state_dir / STATE_FILE
    report = Report(path, backups=list_backups(state_dir))
    if not path.exists():
        report.problems.append("there is no state file (a gateway makes one when it first starts)")
        return report
    if path.stat().st_size == 0:
        report.problems.append("the file is empty (0 bytes): it was truncated")
        return report
    try:
        with contextlib.closing(_read_only(path)) as db:
            report.version = db.execute("PRAGMA user_version").fetchone()[0]
            integrity = [str(row[0]) for row in db.execute("PRAGMA integrity_check(20)").fetchall()]
            if integrity != ["ok"]:
                report.problems.append("SQLite's integrity check found " + "; ".join(integrity))
                return report
            if report.version is not None and report.version > SCHEMA_VERSION:
                report.problems.append(f"it was written by a newer pier (state schema {report.version}; this pier "
                                       f"reads up to {SCHEMA_VERSION})")
                return report
            present = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            for table in TABLES:
                if table not in present:
                    if report.version:
                        report.problems.append(f"its table {table} is gone")
                    continue
                rows = db.execute(f"SELECT CAST(name AS BLOB), created, CAST(body AS BLOB) FROM {table} "
                                  "ORDER BY created, name").fetchall()
                read = [read_row(table, *row) for row in rows]
                report.unreadable += [r for r in read if isinstance(r, BadRow)]
                report.records[table] = sum(1 for r in read if not isinstance(r, BadRow))
    except sqlite3.DatabaseError as error:
        report.problems.append(f"SQLite says {error}")
    return report


# ---- the gateway's hold on its folder


class GatewayLock:
    """An exclusive flock on <state_dir>/gateway.lock for as long as a gateway runs (released by the kernel
    when the process ends, however it ends), so a second gateway or a restore cannot work under it."""

    def __init__(self, file: IO[str]) -> None:
        self._file = file

    @classmethod
    def take(cls, state_dir: Path) -> GatewayLock:
        private_dir(state_dir)
        file = _open_lock(state_dir)
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = file.read().strip() or "unknown"
            file.close()
            raise StateError(f"Another pier gateway (pid {holder}) is using {state_dir}; stop it, or give this one "
                             "another --state-dir.") from None
        file.seek(0)
        file.truncate()
        file.write(f"{os.getpid()}\n")
        file.flush()
        return cls(file)

    def release(self) -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
        self._file.close()


def lock_holder(state_dir: Path) -> str | None:
    """The pid of the gateway holding `state_dir` ("unknown" when it wrote none), or None when none does."""
    if not (state_dir / LOCK_FILE).exists():
        return None
    with _open_lock(state_dir) as file:
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return file.read().strip() or "unknown"
        fcntl.flock(file.fileno(), fcntl.LOCK_UN)
        return None


def _open_lock(state_dir: Path) -> IO[str]:
    fd = os.open(state_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, FILE_MODE)
    return os.fdopen(fd, "r+")


@contextlib.contextmanager
def holding(state_dir: Path) -> Iterator[GatewayLock]:
    lock = GatewayLock.take(state_dir)
    try:
        yield lock
    finally:
        lock.release()
