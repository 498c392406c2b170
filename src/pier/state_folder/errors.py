"""A file of the state folder pier cannot use: refused with its name and the ways out, never replaced."""

from __future__ import annotations

from pathlib import Path

from pier.errors import PierError, Wire
from pier.state_folder.layout import BACKUPS, backup_pattern


class StateError(PierError):
    """The state file cannot be used as it is; the message says why and what to do."""

    code = "state_unusable"


class StateUnavailable(StateError):
    """The state database cannot be reached now (it restarts, or dropped the connection): this request fails with
    503 in its API's dialect, and the store connects again on a later request once the database is back."""

    code = "state_unavailable"
    wire = Wire(503, "service_unavailable_error", 503, "unavailable", 503, "ServiceUnavailable")


class StateDamaged(StateError):
    """A file of the state folder pier cannot read: it is refused, never replaced by an empty one."""

    code = "state_damaged"

    def __init__(self, path: Path, problem: str, without: str = "no resources") -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"pier cannot use its state file {path}: {problem}.\n{damage_advice(path, without)}")


class NotAFile(StateError):
    """Something in the state folder where pier keeps a file of its own that is no file (a folder): no store's,
    so nothing to restore; moving it aside is the fix."""

    def __init__(self, path: Path, problem: str, holds: str) -> None:
        super().__init__(f"pier cannot use {path}: {problem}, where pier keeps {holds}. Move it aside and start "
                         f"again: mv {path} {path}.aside")


class StateTooNew(StateError, RuntimeError):
    code = "state_too_new"


def damage_advice(path: Path, without: str = "no resources") -> str:
    """The ways out of a damaged state file, with the commands to type; `without` is what starting without the
    file means."""
    folder = path.parent
    backups = sorted((folder / BACKUPS).glob(backup_pattern(path.name)), reverse=True)
    newest = f" (the newest is {backups[0].name})" if backups else ""
    restore = (f"  - restore the newest backup{newest}:  pier state restore --state-dir {folder}\n" if backups
               else f"  - (there is no backup of it under {folder / BACKUPS} to restore)\n")
    return (
        "pier does not start on it, and never replaces it with an empty one. Either\n"
        f"{restore}"
        f"  - or move the file aside and start with {without}:  mv {path} {path}.damaged\n"
        f"`pier state check --state-dir {folder}` shows what is wrong with it."
    )
