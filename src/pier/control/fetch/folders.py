"""What a model folder may be, and what is in it, found without unbounded work.

A model folder is walked once, on a fetch's worker thread (never on the gateway's event loop), to learn the size
of its GGUF weights (copies of one file share its pages, so packing counts them once). The walk has bounds: it
stops, and the folder is refused, past `MAX_ENTRIES` files and folders or `MAX_DEPTH` levels; and a folder that
is a whole filesystem (`/`, the kernel's `/proc`, `/sys`, `/dev` and their kind) is refused before any walk.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

MAX_ENTRIES = 100_000  # a model with its code is a few hundred at most; a home folder or /usr is far more
MAX_DEPTH = 32
# Never a model inside these (/dev goes by its filesystem: /dev/shm is tmpfs and may hold one).
KERNEL_ROOTS = (Path("/proc"), Path("/sys"))
# Filesystems the kernel makes up: never model files.
PSEUDO_FILESYSTEMS = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs", "bpf",
    "pstore", "configfs", "fusectl", "mqueue", "hugetlbfs", "autofs", "binfmt_misc", "efivarfs", "nsfs",
    "rpc_pipefs", "selinuxfs",
})


class FolderRefused(ValueError):
    """The folder cannot be a model folder; the message says why and what to give instead."""


@dataclass(frozen=True)
class FolderInfo:
    entries: int  # files and folders walked
    weights_bytes: int  # the GGUF files in it (links followed: a lone GGUF is served through a link to it)

    @property
    def weights_mb(self) -> int:
        return self.weights_bytes // 2**20


def whole_filesystem(path: Path) -> str:
    """Why `path` is a whole filesystem rather than a model folder ("" when it is not): cheap, no walk."""
    resolved = Path(os.path.realpath(path))
    if resolved == Path(resolved.anchor):
        return f"{path} is the root of the filesystem"
    for root in KERNEL_ROOTS:
        if resolved == root or root in resolved.parents:
            return f"{path} is in {root}, a filesystem the kernel makes up"
    if resolved == Path("/dev"):
        return f"{path} is the kernel's device filesystem"
    kind = _filesystem_of(resolved)
    if kind in PSEUDO_FILESYSTEMS:
        return f"{path} is on a {kind} filesystem, which the kernel makes up"
    return ""


def check_folder(path: Path) -> None:
    reason = whole_filesystem(path)
    if reason:
        raise FolderRefused(f"{reason}, not a model folder: give the folder that holds the model's files.")


def measure(folder: Path, *, max_entries: int = MAX_ENTRIES, max_depth: int = MAX_DEPTH) -> FolderInfo:
    """Walk `folder` within the bounds (blocking: run it on a worker thread). Links to folders are not followed;
    links to files are, for their size."""
    check_folder(folder)
    entries = 0
    weights = 0
    pending: list[tuple[Path, int]] = [(folder, 0)]
    while pending:
        current, depth = pending.pop()
        if depth > max_depth:
            raise FolderRefused(f"{folder} nests folders more than {max_depth} deep; give the folder that holds the "
                                "model's files.")
        try:
            with os.scandir(current) as listing:
                for entry in listing:
                    entries += 1
                    if entries > max_entries:
                        raise FolderRefused(
                            f"{folder} holds more than {max_entries} files and folders, more than any model: give "
                            "the folder that holds just the model's files (its GGUF, or code/inference.py and "
                            "what it loads).")
                    if entry.is_dir(follow_symlinks=False):
                        pending.append((Path(entry.path), depth + 1))
                    elif entry.name.endswith(".gguf"):
                        weights += _size(entry)
        except PermissionError as error:
            raise FolderRefused(f"pier may not read {current} ({error.strerror}); give a model folder the gateway's "
                                "user can read.") from None
    return FolderInfo(entries, weights)


def _size(entry: os.DirEntry[str]) -> int:
    try:
        info = entry.stat()  # follows a link to its file
    except OSError:
        return 0
    return info.st_size if stat.S_ISREG(info.st_mode) else 0


def _filesystem_of(path: Path) -> str:
    """The type of the filesystem `path` is on, from /proc/self/mountinfo ("" when that cannot be read)."""
    best, kind = "", ""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return ""
    text = str(path)
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) < 5 or not right:
            continue
        mount = _unescape(fields[4])
        inside = text == mount or text.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) > len(best):
            best, kind = mount, right.split()[0]
    return kind


def _unescape(field: str) -> str:
    """mountinfo writes spaces, tabs, newlines and backslashes in paths as octal escapes (\\040)."""
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
