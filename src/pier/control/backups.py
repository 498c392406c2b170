"""Backups of the state folder's files, restoring them, and checking them: what `pier state` and the gateway's
backup schedule do, the same way for every file they are given (the gateway lists them:
`pier.gateway.state_files.FILES`: state.sqlite3, autoscaling.sqlite3, keys.json, ...).

    <state_dir>/state.sqlite3                            ResourceStore's, and the other files beside it
    <state_dir>/backups/<stem>-<UTC time><suffix>        generations of each file, newest last:
                                                         state-*.sqlite3, autoscaling-*.sqlite3, keys-*.json
    <state_dir>/gateway.lock                             held (flock) by the `pier up` that uses this folder

A backup is a checked copy (a SQLite file with SQLite's online backup from its own read-only connection while the
gateway keeps writing; keys.json only when it reads whole), and only then may an old generation go: a damaged file
never pushes a good backup out, and the newest generation whose rows all read is kept past the count while newer
ones hold an unreadable row. `restore()` puts back, for each file that needs it, the newest backup whose rows all
read, says what that backup lacks, moves the current file (and its log) aside first, and refuses while a gateway
holds the folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from pier.control.resource_store import STATE_FILE
from pier.env import GATEWAY, Env, integer, number
from pier.state_folder.errors import NotAFile, StateError
from pier.state_folder.files import Report, StateFile, by_name, of_backup
from pier.state_folder.layout import BACKUPS, FILE_MODE, SIDE_FILES, backup_pattern, not_a_file, private_dir

log = logging.getLogger("pier.control")

LOCK_FILE = "gateway.lock"
DEFAULT_EVERY_S = 15 * 60.0
DEFAULT_KEEP = 5

__all__ = ["Report"]  # re-exported: pier state check's reports


@dataclass(frozen=True)
class BackupPolicy:
    every_s: float = DEFAULT_EVERY_S  # how often the gateway backs its state up (when it changed)
    keep: int = DEFAULT_KEEP  # generations kept under <state_dir>/backups, of each file

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> BackupPolicy:
        """PIER_STATE_BACKUP_MINUTES and PIER_STATE_BACKUPS, when set."""
        read, problem = Env(env, GATEWAY), "{name}={raw!r} is not a positive number; unset it for the default ({})."
        minutes = read.get("PIER_STATE_BACKUP_MINUTES", cast=number(above=0), default=DEFAULT_EVERY_S / 60,
                           problem=problem.replace("{}", f"{DEFAULT_EVERY_S / 60:g}"))
        keep = read.get("PIER_STATE_BACKUPS", cast=integer(), default=DEFAULT_KEEP,
                        problem=problem.replace("{}", str(DEFAULT_KEEP)))
        return cls(every_s=minutes * 60, keep=keep)


# ---- making and listing backups


def backups_dir(state_dir: Path) -> Path:
    return state_dir / BACKUPS


def list_backups(state_dir: Path, name: str = STATE_FILE) -> list[Path]:
    """Every backup generation of the state file called `name`, oldest first."""
    return sorted(backups_dir(state_dir).glob(backup_pattern(name)))


def backup(file: StateFile, path: Path, keep: int = DEFAULT_KEEP, *, now: float | None = None) -> Path:
    """A checked copy of the state file `file` at `path` as it is now, among the newest `keep` generations under
    its folder's backups/ (older ones are removed once the new one is in place, but for the newest one whose rows
    all read). Safe while a gateway writes."""
    folder = backups_dir(path.parent)
    private_dir(folder)
    stamp = datetime.fromtimestamp(time.time() if now is None else now, UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    final = folder / file.pattern.replace("*", stamp)
    scratch = folder / f".{final.name}.new"
    file.copy(path, scratch)
    os.replace(scratch, final)
    made = list_backups(path.parent, file.name)
    old = made[:-keep]
    if old:
        good = next((b for b in reversed(made) if file.check(b).ok), None)
        for generation in old:
            if generation != good:
                generation.unlink(missing_ok=True)
    return final


def backup_problem(file: StateFile, path: Path) -> str:
    """Why the backup of `file` at `path` is not a whole, good state ("" when it is): damage, or rows that do not
    read."""
    report = file.check(path)
    if report.problems:
        return "; ".join(report.problems)
    if report.unreadable:
        return "rows that do not read: " + ", ".join(f"{r.kind} {r.name}" for r in report.unreadable)
    return ""


@dataclass
class Watched:
    """A file the schedule backs up, and a mark that moves when it may have changed."""

    file: StateFile
    path: Path
    mark: Callable[[], object]
    saved: object = None  # the mark at the last backup

    def __post_init__(self) -> None:
        self.saved = self.mark()


def file_mark(path: Path) -> Callable[[], object]:
    """For a file rewritten whole (keys.json): it changed when its inode, time or size did."""
    def mark() -> object:
        try:
            info = path.stat()
        except FileNotFoundError:
            return None
        return (info.st_ino, info.st_mtime_ns, info.st_size)

    return mark


class Backups:
    """The gateway's schedule, for each watched file: a generation when the gateway starts with none, then every
    `every_s` when the file changed since its last one, and a last one on the way out."""

    def __init__(self, watched: Sequence[Watched], policy: BackupPolicy | None = None) -> None:
        self.watched = list(watched)
        self.policy = policy or BackupPolicy()

    def due(self, watched: Watched, *, starting: bool = False) -> bool:
        """When the file is there and: it has no backup, it changed since the last one, or, as the gateway starts,
        it is newer than its newest backup (an earlier gateway may have ended without its last one)."""
        if not watched.path.exists():
            return False
        made = list_backups(watched.path.parent, watched.file.name)
        if not made or watched.mark() != watched.saved:
            return True
        if not starting:
            return False
        written = max((Path(f"{watched.path}{s}").stat().st_mtime for s in ("", "-wal")
                       if Path(f"{watched.path}{s}").exists()), default=0.0)
        return written > made[-1].stat().st_mtime

    def take(self, *, starting: bool = False) -> list[Path]:
        """The backups due now (blocking: run it on a thread). Failures are logged, never raised: the gateway goes
        on serving, and the next tick tries again."""
        made = []
        for watched in self.watched:
            if not self.due(watched, starting=starting):
                continue
            mark = watched.mark()
            try:
                made.append(backup(watched.file, watched.path, self.policy.keep))
            except (OSError, sqlite3.Error, StateError) as error:
                log.error("could not back up %s: %s", watched.path, getattr(error, "message", error))
                continue
            watched.saved = mark
            log.info("%s backed up to %s", watched.file.name, made[-1])
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
    state: Path  # the file it now is
    moved: tuple[Path, ...]  # what was in the way, and where it went
    lacks: tuple[str, ...] = ()  # "<kind> <name>" the file held that the backup does not (changes since are lost)
    adds: tuple[str, ...] = ()  # what the backup holds that the file did not (deleted or revoked since)
    unknown: str = ""  # why what the file held is not known (it could not be read), else ""


def restore(state_dir: Path, files: Sequence[StateFile], chosen: Path | None = None, *, names: Sequence[str] = (),
            now: float | None = None) -> list[Restored]:
    """Put backups in place of state files (of `files`, the folder's), after moving each current file and its log
    aside. With `chosen`, that backup (of whichever file it is); else, for each file in `names` or, by default,
    each file `check()` finds wrong (state.sqlite3 when none is), the newest backup whose rows all read. Every
    backup is chosen and checked before anything moves. Refused while a gateway uses the folder."""
    holder = lock_holder(state_dir)
    if holder is not None:
        raise StateError(f"A pier gateway (pid {holder}) is using {state_dir}: stop it first, then restore.")
    if chosen is not None:
        plans = [_chosen(state_dir, files, chosen)]
    else:
        wanted = [by_name(files, name) for name in names] or _needing_restore(state_dir, files)
        plans = [(file, _newest_good(state_dir, file)) for file in wanted]
    stamp = datetime.fromtimestamp(time.time() if now is None else now, UTC).strftime("%Y%m%dT%H%M%SZ")
    return [_put_back(state_dir, file, source, stamp) for file, source in plans]


def _needing_restore(state_dir: Path, files: Sequence[StateFile]) -> list[StateFile]:
    wrong = [f for f in files if not f.check(state_dir / f.name).ok]
    return wrong or [by_name(files, STATE_FILE)]


def _put_back(state_dir: Path, file: StateFile, source: Path, stamp: str) -> Restored:
    path = state_dir / file.name
    before = file.check(path)
    after = file.check(source)
    scratch = state_dir / f".{file.name}.restoring"
    file.copy(source, scratch)  # checked before anything of the current file moves
    moved = []
    for suffix in ("", *SIDE_FILES):
        current = Path(f"{path}{suffix}")
        if current.exists():
            aside = Path(f"{path}.before-restore-{stamp}{suffix}")
            os.replace(current, aside)
            moved.append(aside)
    os.replace(scratch, path)
    if not before.present:
        return Restored(source, path, tuple(moved), adds=tuple(sorted(after.names)), unknown="there was no file")
    if before.problems:
        return Restored(source, path, tuple(moved), unknown="the file could not be read")
    return Restored(source, path, tuple(moved), tuple(sorted(before.names - after.names)),
                    tuple(sorted(after.names - before.names)))


def _chosen(state_dir: Path, files: Sequence[StateFile], chosen: Path) -> tuple[StateFile, Path]:
    """The file the chosen backup is a generation of, and the backup, once it is known to be whole."""
    path = chosen if chosen.exists() else backups_dir(state_dir) / chosen
    if not path.is_file():
        known = ", ".join(p.name for f in files for p in list_backups(state_dir, f.name)) or "none"
        raise StateError(f"No backup {chosen}; the backups under {backups_dir(state_dir)} are: {known}.")
    file = of_backup(files, path)
    report = file.check(path)
    if report.problems:  # unreadable rows are the chooser's call: they stay unreadable, as `check` will say
        raise StateError(f"{path} cannot be restored: {'; '.join(report.problems)}.")
    return file, path


def _newest_good(state_dir: Path, file: StateFile) -> Path:
    tried = []
    for candidate in reversed(list_backups(state_dir, file.name)):
        problem = backup_problem(file, candidate)
        if not problem:
            return candidate
        tried.append(f"{candidate.name}: {problem}")
    path = state_dir / file.name
    if not tried:
        raise StateError(f"There is no backup of {file.name} under {backups_dir(state_dir)}. Move the damaged file "
                         f"aside instead: mv {path} {path}.damaged")
    raise StateError(f"No backup of {file.name} is whole with every row readable: " + "; ".join(tried) + ". Restore "
                     f"one of them by name if its unreadable rows are acceptable (pier state restore NAME "
                     f"--state-dir {state_dir}), or move the file aside: mv {path} {path}.damaged")


# ---- checking


def check(state_dir: Path, files: Sequence[StateFile]) -> list[Report]:
    """Everything `pier state check` reports, for each of the folder's `files`: SQLite's full integrity check, the
    schema version, and every row read as the gateway reads it. Reads only; works while a gateway runs."""
    reports = []
    for file in files:
        report = file.check(state_dir / file.name)
        report.backups = list_backups(state_dir, file.name)
        reports.append(report)
    return reports


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
    if not (state_dir / LOCK_FILE).is_file():  # a folder there: no gateway can hold it (GatewayLock refuses it)
        return None
    with _open_lock(state_dir) as file:
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return file.read().strip() or "unknown"
        fcntl.flock(file.fileno(), fcntl.LOCK_UN)
        return None


def _open_lock(state_dir: Path) -> IO[str]:
    if (problem := not_a_file(state_dir / LOCK_FILE)) is not None:
        raise NotAFile(state_dir / LOCK_FILE, problem, "the lock that keeps a second gateway off this folder")
    fd = os.open(state_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, FILE_MODE)
    return os.fdopen(fd, "r+")


@contextlib.contextmanager
def holding(state_dir: Path) -> Iterator[GatewayLock]:
    lock = GatewayLock.take(state_dir)
    try:
        yield lock
    finally:
        lock.release()
