"""A model folder is walked with bounds, on a worker thread; whole filesystems are refused before any walk."""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path

import pytest
from rich.console import Console

from pier.control.fetch import archives
from pier.control.fetch.folders import FolderRefused, check_folder, measure, whole_filesystem
from pier.control.fetch.model_store import ModelDataError, ModelStore
from pier.control.fetch.source import ModelSource


@pytest.mark.parametrize(("path", "words"), [
    ("/", "is the root of the filesystem"),
    ("/proc", "a filesystem the kernel makes up"),
    ("/proc/self", "a filesystem the kernel makes up"),
    ("/sys/kernel", "a filesystem the kernel makes up"),
    ("/dev", "the kernel's device filesystem"),
])
def test_whole_filesystems_are_refused_with_a_reason(path: str, words: str) -> None:
    assert words in whole_filesystem(Path(path))
    with pytest.raises(FolderRefused, match="not a model folder: give the folder that holds the model's files"):
        check_folder(Path(path))


def test_a_link_to_the_root_is_the_root(tmp_path: Path) -> None:
    (tmp_path / "sneaky").symlink_to("/")
    assert "root of the filesystem" in whole_filesystem(tmp_path / "sneaky")
    assert whole_filesystem(tmp_path) == ""


def test_the_walk_measures_gguf_weights_and_follows_links_to_files_only(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.gguf"
    outside.write_bytes(b"x" * 3 * 2**20)
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.gguf").write_bytes(b"x" * 2**20)
    (folder / "sub" / "b.gguf").write_bytes(b"x" * 2**20)
    (folder / "notes.txt").write_text("not weights")
    (folder / "linked.gguf").symlink_to(outside)
    (folder / "loop").symlink_to(folder)  # a link to a folder is not walked: no loop
    info = measure(folder)
    assert info.weights_mb == 5 and info.entries == 6


def test_the_walk_is_bounded(tmp_path: Path) -> None:
    for i in range(30):
        (tmp_path / f"f{i}").touch()
    assert measure(tmp_path, max_entries=30).entries == 30
    with pytest.raises(FolderRefused, match="holds more than 29 files and folders, more than any model"):
        measure(tmp_path, max_entries=29)
    deep = tmp_path / "deep"
    deep.mkdir()
    current = deep
    for i in range(5):
        current = current / str(i)
        current.mkdir()
    assert measure(deep, max_depth=5).entries == 5
    with pytest.raises(FolderRefused, match="nests folders more than 4 deep"):
        measure(deep, max_depth=4)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every folder")
def test_an_unreadable_folder_is_refused(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o000)
    try:
        with pytest.raises(FolderRefused, match="may not read"):
            measure(tmp_path)
    finally:
        locked.chmod(0o700)


def test_the_store_refuses_a_whole_filesystem_and_measures_what_it_fetched(tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "cache", console=Console(quiet=True))
    for path in ("/", "/proc", "file:///sys"):
        with pytest.raises(ModelDataError, match="not a model folder"):
            store.fetch(ModelSource(path))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"x" * 2 * 2**20)
    folder = store.fetch(ModelSource(str(gguf)))  # a lone GGUF: a folder holding a link to it
    assert store.measure(folder).weights_mb == 2
    with pytest.raises(ModelDataError, match="root of the filesystem"):
        store.measure(Path("/"))


def test_an_archive_bigger_than_the_free_space_or_with_too_many_members_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "model.tar"
    with tarfile.open(archive, "w") as tar:
        for i in range(3):
            data = b"x" * 1000
            info = tarfile.TarInfo(f"part-{i}.gguf")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    dest = tmp_path / "out"
    dest.mkdir()
    monkeypatch.setattr(archives.shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**6, 10**6, 2999))
    with pytest.raises(archives.UnsafeArchive, match=r"unpacks to 0\.0 GB, more than the 0\.0 GB free"):
        archives.extract(archive, dest)
    assert list(dest.iterdir()) == []  # refused before anything was written
    monkeypatch.setattr(archives.shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**6, 10**6, 3000))
    monkeypatch.setattr(archives, "MAX_MEMBERS", 2)
    with pytest.raises(archives.UnsafeArchive, match="holds 3 members, more than any model"):
        archives.extract(archive, dest)
    monkeypatch.setattr(archives, "MAX_MEMBERS", 3)
    archives.extract(archive, dest)
    assert len(list(dest.iterdir())) == 3
