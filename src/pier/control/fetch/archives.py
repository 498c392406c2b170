"""Unpacking a model.tar.gz without letting it write outside its folder, or more than the disk holds.

Every member is checked before anything is written (absolute paths, `..`, links that leave the folder,
devices), then tarfile's own "data" filter extracts, so one rule missed here is still caught there. An archive of
more than MAX_MEMBERS members, or whose files add up to more than the destination's free space, is refused
before anything is written (runs on a fetch's worker thread, never on the event loop).
"""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path, PurePosixPath

MAX_MEMBERS = 100_000  # a model is a few hundred files at most


class UnsafeArchive(ValueError):
    """The archive tries to write outside its folder or holds something that is not a file or a folder."""


def extract(archive: Path, dest: Path) -> None:
    """Unpack `archive` (gzip or plain tar) into the existing folder `dest`."""
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            check_size(archive, members, dest)
            for member in members:
                check_member(member)
            tar.extractall(dest, members=members, filter="data")
    except tarfile.FilterError as error:
        raise UnsafeArchive(f"{archive.name} was refused: {error}. Rebuild it with paths relative to the model "
                            "folder (tar -czf model.tar.gz -C model_dir .).") from None
    except tarfile.TarError as error:
        raise UnsafeArchive(f"{archive.name} is not a readable tar archive ({error}); pack the model folder with "
                            "tar -czf model.tar.gz -C model_dir .") from None


def check_size(archive: Path, members: list[tarfile.TarInfo], dest: Path) -> None:
    if len(members) > MAX_MEMBERS:
        raise UnsafeArchive(f"{archive.name} holds {len(members)} members, more than any model ({MAX_MEMBERS}); pack "
                            "only the model folder.")
    total = sum(m.size for m in members if m.isfile())
    free = shutil.disk_usage(dest).free
    if total > free:
        raise UnsafeArchive(f"{archive.name} unpacks to {total / 1e9:.1f} GB, more than the {free / 1e9:.1f} GB free "
                            f"in {dest}; free some space, or give the gateway a --state-dir on a larger disk.")


def check_member(member: tarfile.TarInfo) -> None:
    problem = _problem(member)
    if problem:
        raise UnsafeArchive(
            f"model archive member {member.name!r} {problem}; refusing the whole archive. Pack the model folder "
            "with relative paths and no links out of it (tar -czf model.tar.gz -C model_dir .)."
        )


def _problem(member: tarfile.TarInfo) -> str | None:
    if _escapes(member.name):
        return "would be written outside the model folder"
    if member.issym() or member.islnk():
        target = member.linkname
        # A symlink's target is relative to its own folder; a hard link's to the archive's root.
        base = PurePosixPath(member.name).parent if member.issym() else PurePosixPath()
        if PurePosixPath(target).is_absolute() or _escapes(str(base / target)):
            return f"links to {target!r}, outside the model folder"
        return None
    if not (member.isfile() or member.isdir()):
        return "is a device, a fifo or another special file"
    return None


def _escapes(name: str) -> bool:
    """True when `name` is absolute or climbs above the folder it is unpacked in."""
    path = PurePosixPath(name)
    if path.is_absolute() or name.startswith("\\"):
        return True
    depth = 0
    for part in path.parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            return True
    return False
