"""Where the running gateway listens, as it records it in its state folder, so `pier keys revoke` can say what
revoking the last key does to it (beyond loopback: every call refused). The record is trusted only while the
gateway that wrote it holds the state folder's lock (control.backups.lock_holder gives its pid)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from pier.control.backups import lock_holder
from pier.security.hosts import is_loopback
from pier.state_folder.errors import NotAFile
from pier.state_folder.layout import not_a_file

FILE_NAME = "listening.json"


@dataclass(frozen=True)
class Listening:
    host: str
    port: int
    insecure: bool
    pid: int

    @property
    def beyond_loopback(self) -> bool:
        return not is_loopback(self.host)


@dataclass(frozen=True)
class Running:
    """What the CLI knows of the gateway on a state folder: none runs (pid None), one runs where `listening`
    says, or one runs but where is unknown (listening None: it wrote no record, or an older one's)."""

    pid: str | None
    listening: Listening | None


def record(state_dir: Path, host: str, port: int, insecure: bool) -> None:
    """Called by the gateway once it holds the state folder's lock, before it serves."""
    path = state_dir / FILE_NAME
    if (problem := not_a_file(path)) is not None:
        raise NotAFile(path, problem, "where the gateway listens (for `pier keys revoke`)")
    temporary = path.with_name(f".{FILE_NAME}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(asdict(Listening(host, port, insecure, os.getpid()))))
    os.replace(temporary, path)


def running(state_dir: Path) -> Running:
    pid = lock_holder(state_dir)
    if pid is None:
        return Running(None, None)
    try:
        listening = Listening(**json.loads((state_dir / FILE_NAME).read_text()))
    except (OSError, ValueError, TypeError):
        return Running(pid, None)
    return Running(pid, listening if str(listening.pid) == pid else None)


def revoke_warning(valid_left: int, expired_left: int, gateway: Running) -> str | None:
    """What revoking leaves the gateway doing, when no valid key is left (None while one is)."""
    if valid_left:
        return None
    make = "Create a key to let callers in again (no restart): `pier keys create NAME --role admin`."
    if gateway.pid is None:
        return (f"No key is left. No gateway runs on this state folder now; `pier up` will serve 127.0.0.1 without "
                f"keys, and will refuse to start beyond loopback (--host) without one. {make}")
    where = gateway.listening
    if where is None:
        return (f"No valid key is left. The gateway (pid {gateway.pid}) did not record where it listens: if it "
                "listens beyond loopback (--host 0.0.0.0 or a network address), it now REFUSES EVERY CALL; on "
                f"127.0.0.1 {_loopback_outcome(expired_left)}. {make}")
    if expired_left or (where.beyond_loopback and not where.insecure):
        reason = "its other keys have expired" if expired_left else "it listens beyond loopback"
        return (f"No valid key is left: the gateway (pid {gateway.pid}) on {where.host}:{where.port} now REFUSES "
                f"EVERY CALL ({reason}); each refusal says how to create a key. {make}")
    if where.beyond_loopback:
        return (f"No key is left: the gateway (pid {gateway.pid}) was started with --insecure, so it now serves "
                f"ANYONE who reaches {where.host}:{where.port} WITHOUT AUTHENTICATION. {make}")
    return (f"No key is left: the gateway (pid {gateway.pid}) on {where.host}:{where.port} {_loopback_outcome(0)}. "
            f"{make}")


def _loopback_outcome(expired_left: int) -> str:
    if expired_left:
        return "it refuses every call too (its other keys have expired)"
    return "it now serves every local user without authentication (loopback's default)"
