"""A Hugging Face checkpoint (or a PEFT LoRA adapter) turned into a GGUF once, by llama.cpp's own converter, and
kept in the model store.

    <root>/converted/<key>/model-<type>.gguf   one conversion, named by what it was made from (the fetched folder's
                                               content digest, or a local folder's file names, sizes and times),
                                               the precision and the converter's version: every copy, endpoint and
                                               restart that asks the same is served the same file
    <root>/converted/<key>/adapter-<type>.gguf a LoRA adapter's (its key includes its base's config.json)
    <root>/tmp/convert-<key>-<pid>-*/          a conversion in progress, renamed into place only when complete

The converter and the quantizer run as processes of their own (started from a fetch's worker thread, never the event
loop), which die with the gateway: a conversion killed midway leaves only its scratch folder, which the next try
removes before starting again. Disk space for the output is checked first; every failure becomes a ModelDataError
whose message names the cause and the fix.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from pier.control.fetch import checkpoint, converter, precision
from pier.control.fetch.checkpoint import CheckpointRefused
from pier.control.fetch.conversion_report import failure_reason, progress_of, space_needed
from pier.control.fetch.model_store import ModelDataError
from pier.control.fetch.precision import Precision

log = logging.getLogger("pier.control")

# A child that dies with its parent thread (PR_SET_PDEATHSIG), then runs a script or a module as __main__.
_BOOT = (
    "import ctypes, os, runpy, signal, sys\n"
    "libc = ctypes.CDLL(None)\n"
    "hasattr(libc, 'prctl') and libc.prctl(1, signal.SIGKILL)\n"  # Linux; elsewhere a closed pipe ends it
    "os.getppid() == int(sys.argv[1]) or sys.exit('the gateway that started this conversion is gone')\n"
    "kind, target = sys.argv[2], sys.argv[3]\n"
    "sys.argv = [target, *sys.argv[4:]]\n"
    "if kind == 'module':\n"
    "    runpy.run_module(target, run_name='__main__', alter_sys=True)\n"
    "else:\n"
    "    sys.path.insert(0, os.path.dirname(target))\n"
    "    runpy.run_path(target, run_name='__main__')\n"
)
TAIL_LINES = 40


class Conversions:
    def __init__(self, root: Path, *, locate: Callable[[], Path] = converter.locate) -> None:
        self.root = root
        self._locate = locate
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def serve(self, folder: Path, quantize: str, report: Callable[[str], None], where: str = "",
              base_config: Callable[[str], Path] | None = None) -> Path:
        """The folder to serve for the fetched `folder`: itself unless it is a checkpoint in Hugging Face layout or
        a PEFT LoRA adapter, else the folder of its GGUF, converted now when no earlier conversion made it
        (blocking). `base_config` finds the folder holding an adapter's base model's config.json, by the name
        adapter_config.json gives it."""
        if not checkpoint.is_hf_layout(folder):
            return folder
        where = where or str(folder)
        if checkpoint.is_adapter(folder):
            return self._serve_adapter(folder, quantize, report, where, base_config)
        try:
            found = checkpoint.inspect(folder, where)
            wanted = precision.resolve(quantize, found.dtype)
        except (CheckpointRefused, ValueError) as error:
            raise ModelDataError(str(error)) from None
        key = _key(_content_id(folder, found.files, self.root), wanted.name)
        with self._lock(key):
            if (self.root / "converted" / key / _file_name(wanted)).is_file():
                return self.root / "converted" / key
            if wanted.note:
                log.info("%s: %s", where, wanted.note)
            _check_space(self.root, space_needed(found.weights_bytes, found.dtype, found.quant_method, wanted), where)
            log.info("converting %s (%s, %s) to GGUF %s", where, found.architecture, found.dtype or "?", wanted.name)

            def fill(llama_cpp_dir: Path, scratch: Path, out: Path) -> None:
                staged = _stage(folder, found.files, scratch / "source")
                converted = out / f"converted-{wanted.outtype}.gguf"
                self._run(["path", str(llama_cpp_dir / converter.SCRIPT), str(staged), "--outfile", str(converted),
                           "--outtype", wanted.outtype], report, where, found.architecture)
                if wanted.quantize:
                    report(f"quantizing to {wanted.quantize}")
                    self._run(["module", "pier.model.quantize", str(converted), str(out / _file_name(wanted)),
                               wanted.quantize], report, where, found.architecture)
                    converted.unlink()
                else:
                    converted.rename(out / _file_name(wanted))

            return self._produce(key, fill, report, where)

    def _serve_adapter(self, folder: Path, quantize: str, report: Callable[[str], None], where: str,
                       base_config: Callable[[str], Path] | None) -> Path:
        """A PEFT LoRA adapter through llama.cpp's convert_lora_to_gguf.py, which reads its base model's
        config.json (never the base's weights)."""
        try:
            found = checkpoint.inspect_adapter(folder, where)
            wanted = precision.resolve(quantize, "float32")  # an adapter is small: F32 unless asked otherwise
            if wanted.quantize:
                raise ValueError(f"A LoRA adapter is written as f32, f16, bf16 or q8_0, not {wanted.quantize}: "
                                 "set HF_MODEL_QUANTIZE on the base model instead.")
        except (CheckpointRefused, ValueError) as error:
            raise ModelDataError(str(error)) from None
        if base_config is None:
            raise ModelDataError(f"{where} is a LoRA adapter: give it to an adapter inference component on its base.")
        report(f"reading the base model's config.json ({found.base})")
        base = base_config(found.base)
        config = (base / checkpoint.CONFIG).read_bytes()
        key = _key(_content_id(folder, found.files, self.root), wanted.name, hashlib.sha256(config).hexdigest())
        name = f"adapter-{wanted.name}.gguf"
        with self._lock(key):
            if (self.root / "converted" / key / name).is_file():
                return self.root / "converted" / key
            log.info("converting the LoRA adapter %s (base %s) to GGUF %s", where, found.base, wanted.name)

            def fill(llama_cpp_dir: Path, scratch: Path, out: Path) -> None:
                staged = _stage(folder, found.files, scratch / "source")
                (scratch / "base").mkdir()
                (scratch / "base" / checkpoint.CONFIG).write_bytes(config)
                self._run(["path", str(llama_cpp_dir / converter.LORA_SCRIPT), "--base", str(scratch / "base"),
                           "--outfile", str(out / name), "--outtype", wanted.outtype, str(staged)],
                          report, where, "LoRA adapter")

            return self._produce(key, fill, report, where)

    def _produce(self, key: str, fill: Callable[[Path, Path, Path], None], report: Callable[[str], None],
                 where: str) -> Path:
        """Run `fill(llama.cpp folder, scratch, out)` in a scratch folder of its own, then rename `out` into
        converted/<key>: a conversion that does not finish leaves nothing there."""
        tmp = self.root / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        _remove_orphans(tmp, key)
        report("fetching llama.cpp's converter")
        try:
            llama_cpp_dir = self._locate()
        except converter.ConverterMissing as error:
            raise ModelDataError(str(error)) from None
        scratch = Path(tempfile.mkdtemp(prefix=f"convert-{key[:16]}-{os.getpid()}-", dir=tmp))
        try:
            out = scratch / "out"
            out.mkdir()
            fill(llama_cpp_dir, scratch, out)
            final = self.root / "converted" / key
            final.parent.mkdir(parents=True, exist_ok=True)
            out.rename(final)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        report("converted")
        for produced in final.iterdir():
            log.info("%s converted: %s (%.1f MB)", where, produced, produced.stat().st_size / 1e6)
        return final

    def _run(self, args: list[str], report: Callable[[str], None], where: str, architecture: str) -> None:
        env = {k: v for k, v in os.environ.items() if k != "NO_LOCAL_GGUF"}  # the converter's own gguf-py
        env |= {"PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        command = [sys.executable, "-c", _BOOT, str(os.getpid()), *args]
        tail: deque[str] = deque(maxlen=TAIL_LINES)
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env=env) as process:
            assert process.stdout is not None
            for line in _lines(process.stdout):
                tail.append(line)
                step = progress_of(line)
                if step:
                    report(step)
            code = process.wait()
        if code != 0:
            log.warning("converting %s failed (exit %s); its last lines:\n%s", where, code, "\n".join(tail))
            raise ModelDataError(failure_reason(list(tail), code, architecture, where))

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())


def _key(*parts: str) -> str:
    """What a conversion is made from, with the converter's version, as the name of its folder."""
    return hashlib.sha256(json.dumps([*parts, converter.version()]).encode()).hexdigest()


def _file_name(wanted: Precision) -> str:
    return f"model-{wanted.name}.gguf"


def _content_id(folder: Path, files: tuple[str, ...], root: Path) -> str:
    """A fetched folder is named by its content's digest already; a local one (served where it is) by its files'
    names, sizes and modification times, so an edited checkpoint converts again."""
    if folder.parent == root / "sha256":
        return folder.name
    rows = [(name, (folder / name).stat().st_size, (folder / name).stat().st_mtime_ns) for name in files]
    return "local:" + hashlib.sha256(json.dumps([str(folder.resolve()), rows]).encode()).hexdigest()


def _stage(folder: Path, files: tuple[str, ...], into: Path) -> Path:
    """A folder of links to just the files the converter may read: pickles and code stay out of its reach."""
    into.mkdir()
    for name in files:
        (into / name).symlink_to((folder / name).resolve())
    return into


def _check_space(where_written: Path, needed: int, where: str) -> None:
    where_written.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(where_written).free
    if needed > free:
        raise ModelDataError(f"Converting {where} needs about {needed / 1e9:.1f} GB free in {where_written}, which has "
                             f"{free / 1e9:.1f} GB: free some space, give the gateway a --state-dir on a larger disk, "
                             "or ask for a smaller precision (HF_MODEL_QUANTIZE=q4_k_m).")


def _remove_orphans(tmp: Path, key: str) -> None:
    """Scratch folders of this conversion left by a gateway that died midway: its process is gone, or had this
    process's id (a container's gateway restarts as the same pid; the caller holds the key's lock, so no scratch
    of this key is this process's own)."""
    for scratch in tmp.glob(f"convert-{key[:16]}-*"):
        match = re.match(rf"convert-{key[:16]}-(\d+)-", scratch.name)
        if match and (int(match.group(1)) == os.getpid() or not _alive(int(match.group(1)))):
            log.info("removing %s, left by a conversion that did not finish", scratch)
            shutil.rmtree(scratch, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lines(stream: IO[bytes]) -> Iterator[str]:
    """The child's output line by line, progress bars' carriage returns counted as line ends."""
    buffer = b""
    while chunk := os.read(stream.fileno(), 65536):
        buffer += chunk
        *complete, buffer = re.split(rb"[\r\n]", buffer)
        for raw in complete:
            if raw.strip():
                yield raw.decode("utf-8", "replace").rstrip()
    if buffer.strip():
        yield buffer.decode("utf-8", "replace").rstrip()
