"""Which console sources the committed build came from: a digest of every source file, written beside the built
files by `console/build.sh`, so a test fails when the sources changed and nobody rebuilt."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable
from pathlib import Path

from pier.console.assets import STATIC

STAMP = "source-digest.txt"
SOURCES = ("index.html", "package.json", "package-lock.json", "vite.config.js", "build.sh")
SOURCE_FOLDERS = ("src",)


def source_files(root: Path) -> list[Path]:
    """The console's sources under `root` (the repo's console/ folder), in a fixed order."""
    files = [root / name for name in SOURCES if (root / name).is_file()]
    for folder in SOURCE_FOLDERS:
        files += [p for p in (root / folder).rglob("*") if p.is_file()]
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def digest(root: Path, files: Iterable[Path]) -> str:
    """sha256 over each file's path (relative, with /) and bytes: renaming a file changes it too."""
    hasher = hashlib.sha256()
    for path in files:
        hasher.update(path.relative_to(root).as_posix().encode() + b"\0")
        hasher.update(path.read_bytes() + b"\0")
    return hasher.hexdigest()


def recorded(static: Path = STATIC) -> str | None:
    path = static / STAMP
    return path.read_text().strip() if path.is_file() else None


def main(argv: list[str]) -> int:
    """`python -m pier.console.stamp CONSOLE_DIR [STATIC_DIR]`: record the digest of the sources just built."""
    root = Path(argv[0])
    static = Path(argv[1]) if len(argv) > 1 else STATIC
    (static / STAMP).write_text(digest(root, source_files(root)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
