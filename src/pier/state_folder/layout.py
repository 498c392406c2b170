"""Where things lie in the state folder, and who may read them: the folder is private (0700) and the files 0600,
since models' Environment blocks carry tokens."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

log = logging.getLogger("pier.control")  # the name its lines had when this lived in the control plane

BACKUPS = "backups"
SIDE_FILES = ("-wal", "-shm")  # SQLite's write-ahead log and its index, beside the database
DIR_MODE = 0o700
FILE_MODE = 0o600


def backup_pattern(name: str) -> str:
    """The glob of the backups of the state file called `name`: state.sqlite3's are state-<UTC time>.sqlite3."""
    stem, dot, suffix = name.partition(".")
    return f"{stem}-*{dot}{suffix}"


def not_a_file(path: Path) -> str | None:
    """Why `path` cannot be a state file although something is there (a folder made by hand or by a volume
    mount, a device), or None: opening one raised an OSError (or SQLite's 'unable to open') and not the fix."""
    if path.is_file() or not os.path.lexists(path):
        return None
    return "it is a folder, not a file" if path.is_dir() else "it is not a regular file"


def private_dir(folder: Path) -> None:
    """Make `folder` (and its missing parents) and keep it to this user: it holds tokens."""
    folder.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    try:
        if folder.stat().st_mode & 0o077:
            os.chmod(folder, DIR_MODE)
    except OSError as error:
        log.warning("could not make %s private (mode 0700): %s; it holds models' Environment blocks", folder, error)


def sync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
