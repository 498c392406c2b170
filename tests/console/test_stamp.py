"""The committed console build matches its sources: rebuild with console/build.sh when this fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from pier.console.assets import STATIC
from pier.console.stamp import digest, main, recorded, source_files

CONSOLE = Path(__file__).resolve().parents[2] / "console"


def test_the_committed_build_is_built_from_the_committed_sources() -> None:
    assert recorded() == digest(CONSOLE, source_files(CONSOLE)), (
        "The console's sources changed since its static files were built: run console/build.sh and commit "
        "src/pier/console/static.")
    assert (STATIC / "index.html").is_file()
    assert any((STATIC / "assets").glob("*.js"))


def test_the_sources_are_the_console_folder_without_node_modules() -> None:
    names = [p.relative_to(CONSOLE).as_posix() for p in source_files(CONSOLE)]
    expected = {"index.html", "package.json", "package-lock.json", "vite.config.js", "build.sh", "src/main.jsx"}
    assert expected <= set(names)
    assert not [n for n in names if n.startswith("node_modules")]
    assert names == sorted(names)


def write(root: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return digest(root, source_files(root))


BASE = {"index.html": "<html>", "src/app.js": "one"}


@pytest.mark.parametrize(("change", "same"), [
    ({}, True),
    ({"src/app.js": "two"}, False),  # a source's bytes
    ({"src/other.js": "one"}, False),  # a new source
    ({"node_modules/x/index.js": "x"}, True),  # not a source
    ({"README.txt": "x"}, True),  # not a source
])
def test_the_digest_follows_sources_only(tmp_path: Path, change: dict[str, str], same: bool) -> None:
    before = write(tmp_path / "a", BASE)
    after = write(tmp_path / "b", {**BASE, **change})
    assert (before == after) is same


def test_a_renamed_source_changes_the_digest(tmp_path: Path) -> None:
    assert write(tmp_path / "a", {"src/a.js": "x"}) != write(tmp_path / "b", {"src/b.js": "x"})


def test_main_records_the_digest_beside_the_build(tmp_path: Path) -> None:
    write(tmp_path / "console", BASE)
    (tmp_path / "static").mkdir()
    assert main([str(tmp_path / "console"), str(tmp_path / "static")]) == 0
    assert recorded(tmp_path / "static") == digest(tmp_path / "console", source_files(tmp_path / "console"))
