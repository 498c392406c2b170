"""One copy's operating-system process: how it is started, recognised after a gateway restart, and stopped."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pier
from pier.backends.base import CopySpec
from pier.security.copy_secret import COPY_SECRET_ENV

PIER_ROOT = str(Path(pier.__file__).resolve().parent.parent)


def free_port() -> int:
    """A loopback port free right now. Another process may take it before the copy binds it; the copy then
    exits, and its restart picks a new port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def command(python: str, spec: CopySpec, port: int) -> list[str]:
    """The model server for `spec`, started through the launcher that pins it and ties it to this process."""
    server = [python, "-m", "pier.server.container", "--model", str(spec.model_dir), "--port", str(port),
              "--host", "127.0.0.1"]
    if spec.cores:
        server += ["--threads", str(len(spec.cores))]
    cores = ",".join(str(core) for core in spec.cores)
    return [python, "-m", "pier.backends.launch", "--parent", str(os.getpid()), "--cores", cores, "--", *server]


def environment(spec: CopySpec) -> dict[str, str]:
    """This process's environment plus the model's Environment block; pier stays importable in the copy."""
    env = {**os.environ, **spec.environment}
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([*paths, PIER_ROOT] if PIER_ROOT not in paths else paths)
    env["PYTHONUNBUFFERED"] = "1"  # its log is read while it runs
    return env


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


@dataclass(frozen=True)
class PidFile:
    """Which process a copy ran as (pid and kernel start time), so a later gateway can recognise it."""

    path: Path

    def write(self, pid: int) -> None:
        self.path.write_text(f"{pid} {start_time(pid)}\n")

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    def kill_survivor(self) -> int | None:
        """SIGKILL the copy an earlier gateway left running, if it still is; its pid, or None."""
        try:
            pid_text, started = self.path.read_text().split()
            pid = int(pid_text)
        except (OSError, ValueError):
            return None
        finally:
            self.clear()
        if start_time(pid) != started:  # gone, or the pid now belongs to another process
            return None
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return None
        return pid


def start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot ("" when it is gone): with the pid, a unique name."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]  # field 22; the command name before ")" may hold spaces


class CopyProcess:
    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process

    @classmethod
    def spawn(cls, spec: CopySpec, port: int, log: Path, *, python: str = sys.executable,
              secret: str | None = None) -> CopyProcess:
        """`secret`: the copy answers only requests that carry it (pier.security.copy_secret)."""
        env = {**environment(spec), **({COPY_SECRET_ENV: secret} if secret else {})}
        with log.open("ab") as out:
            process = subprocess.Popen(
                command(python, spec, port), env=env, cwd=log.parent, stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT,
                # Its own session: a Ctrl-C meant for the gateway must not reach the copy behind stop()'s back.
                start_new_session=True,
            )
        return cls(process)

    @property
    def pid(self) -> int:
        return self._process.pid

    def poll(self) -> int | None:
        return self._process.poll()

    def kill(self) -> None:
        if self._process.poll() is None:
            self._process.kill()

    async def stop(self, grace_s: float) -> int:
        """SIGTERM (the model server drains its requests), then SIGKILL after `grace_s`; the exit code."""
        if self._process.poll() is None:
            self._process.terminate()
            if await self.wait(grace_s) is None:
                self._process.kill()
        code = await self.wait(5.0)
        return code if code is not None else self._process.wait()

    async def wait(self, timeout_s: float) -> int | None:
        """The exit code once it has exited, or None if it still runs after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while (code := self._process.poll()) is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return code
