"""A copy's model files on its node. The gateway has fetched them (pier.control.fetch) into a folder of its own; a
node that sees that folder (the same host, or a shared filesystem) serves it where it is. Any other node gets the
files once through Ray's object store, in chunks, into a content-addressed cache of its own:

    <node_dir>/models/<key>/   one model folder, named by what the gateway's folder holds (its store digest, or
                               its path, file names, sizes and times); copies on the node share it (and its pages)
    <node_dir>/models/tmp/     transfers in progress, renamed into place when complete
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CHUNK_BYTES = 16 * 2**20  # one object in the store at a time, per transfer


@dataclass(frozen=True)
class ModelFile:
    name: str  # relative to the model folder, '/'-separated
    size: int


@dataclass(frozen=True)
class Manifest:
    """What a model folder holds, as the gateway sees it; links are followed (a copy reads what they point to)."""

    folder: str  # the gateway's path to it
    key: str
    files: tuple[ModelFile, ...]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def manifest_of(folder: Path) -> Manifest:
    files, times = [], []
    for path in sorted(folder.rglob("*")):
        if path.is_file():  # follows links
            stat = path.stat()
            name = path.relative_to(folder).as_posix()
            files.append(ModelFile(name, stat.st_size))
            times.append((name, stat.st_size, stat.st_mtime_ns))
    if folder.parent.name == "sha256":  # pier's store: the folder is named by its content already
        key = folder.name
    else:
        key = hashlib.sha256(json.dumps([str(folder.resolve()), times]).encode()).hexdigest()
    return Manifest(str(folder), key, tuple(files))


def file_manifest(path: Path) -> Manifest:
    """One file of a folder (an adapter's GGUF, beside whatever else its artifact holds) as a manifest of its own:
    a node gets that file alone, into a folder named by the file's path, size and time."""
    stat = path.stat()
    key = hashlib.sha256(json.dumps([str(path.resolve()), stat.st_size, stat.st_mtime_ns]).encode()).hexdigest()
    return Manifest(str(path.parent), key, (ModelFile(path.name, stat.st_size),))


def holds(folder: Path, manifest: Manifest) -> bool:
    """Whether `folder` has every file of the manifest, at its size (what a node checks before using a path)."""
    try:
        return folder.is_dir() and all((folder / f.name).stat().st_size == f.size for f in manifest.files)
    except OSError:
        return False


def chunks(manifest: Manifest, size: int = CHUNK_BYTES) -> Iterator[tuple[str, int, bytes]]:
    """(file name, offset, bytes) for every file, read on the gateway; an empty file is one empty chunk."""
    root = Path(manifest.folder)
    for item in manifest.files:
        with (root / item.name).open("rb") as source:
            offset = 0
            while True:
                data = source.read(size)
                if data or offset == 0:
                    yield item.name, offset, data
                offset += len(data)
                if len(data) < size:
                    break


class NodeModels:
    """The node's side: where a model is, and receiving one."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, manifest: Manifest) -> Path | None:
        """A folder on this node holding the model, if there is one."""
        cached = self.root / manifest.key
        if holds(cached, manifest):
            return cached
        return None

    def begin(self) -> Path:
        (self.root / "tmp").mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(dir=self.root / "tmp"))

    @staticmethod
    def write(scratch: Path, name: str, offset: int, data: bytes) -> None:
        target = scratch / name
        if not target.resolve().is_relative_to(scratch.resolve()):
            raise ValueError(f"model file {name!r} would land outside the model folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("r+b" if offset else "wb") as out:
            out.seek(offset)
            out.write(data)

    def publish(self, scratch: Path, manifest: Manifest) -> Path:
        """Move a complete transfer into place (a half-written model is never served)."""
        if not holds(scratch, manifest):
            shutil.rmtree(scratch, ignore_errors=True)
            raise ValueError(f"the copy of {manifest.folder} is incomplete")
        final = self.root / manifest.key
        try:
            os.rename(scratch, final)
        except OSError:
            shutil.rmtree(scratch, ignore_errors=True)
            if not holds(final, manifest):  # else another copy on this node got there first
                raise
        return final
