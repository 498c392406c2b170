"""A model's own Python environment: `code/requirements.txt` installed into a virtualenv that sees pier's
packages behind the model's, built once per requirements file and shared by the model's copies."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import logging
import re
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from pier.server.byoc.errors import HandlerError

log = logging.getLogger("pier.server.byoc")


async def prepare_python(requirements: Path, env_dir: Path) -> str:
    """The interpreter the workers run: pier's own, or, when the model has requirements, a virtual
    environment of its own in env_dir that sees pier's packages behind the model's. pip skips what
    pier's environment already satisfies, as it would in a SageMaker container, and never writes there."""
    if not requirements.is_file() or not _requirement_lines(requirements):
        return sys.executable
    python = env_dir / "bin" / "python"
    key = _environment_key(requirements)
    marker = env_dir / "requirements.sha256"
    async with _file_lock(env_dir.with_name(env_dir.name + ".lock")):
        if python.exists() and marker.is_file() and marker.read_text() == key:
            return str(python)
        shutil.rmtree(env_dir, ignore_errors=True)
        await _run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], cwd=requirements.parent)
        _link_pier_packages(python)
        await _pip_install(python, requirements)
        marker.write_text(key)
    return str(python)


def _requirement_lines(requirements: Path) -> list[str]:
    lines = (line.strip() for line in requirements.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _pier_site_dirs() -> list[str]:
    return [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]


def _environment_key(requirements: Path) -> str:
    digest = hashlib.sha256(requirements.read_bytes())
    for part in (sys.version, sys.executable, *_pier_site_dirs()):
        digest.update(b"\0" + part.encode())
    return digest.hexdigest()


def _link_pier_packages(python: Path) -> None:
    # A .pth import line runs site.addsitedir, so pier's packages (and their own .pth files, such as
    # editable installs) come after the model's, whether pier itself runs in a virtualenv or not.
    site_packages = next(python.parent.parent.glob("lib/python*/site-packages"))
    line = f"import site; list(map(site.addsitedir, {_pier_site_dirs()!r}))\n"
    (site_packages / "_pier_packages.pth").write_text(line)


async def _pip_install(python: Path, requirements: Path) -> None:
    command = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
               "-r", str(requirements)]
    log.info("installing %s for this model into %s", requirements, python.parent.parent)
    # Relative paths in a requirements file (./mypkg) are relative to the working directory.
    code, output = await _run(command, cwd=requirements.parent, check=False)
    if code != 0:
        log.error("pip install -r %s failed:\n%s", requirements, output)
        raise HandlerError(500, _pip_failure(requirements, output))


def _pip_failure(requirements: Path, output: str) -> str:
    names = re.findall(r"(?:requirement|distribution found for|Failed to build|Could not build wheels for)\s+"
                       r"([^\s(;]+)", output)
    culprit = names[-1] if names else ", ".join(_requirement_lines(requirements))
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = ([line for line in lines if line.lower().startswith("error")] or lines)[-3:]
    return (f"Installing {requirements} failed at {culprit}: {' | '.join(errors)}. Fix or remove that "
            f"requirement (or make the package index reachable); pip's full output is in the log.")


async def _run(command: list[str], cwd: Path, check: bool = True) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        *command, cwd=cwd, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await process.communicate()
    except asyncio.CancelledError:
        process.kill()
        raise
    output = out.decode("utf-8", "replace")
    if check and process.returncode != 0:
        tail = output.strip()[-500:]
        raise HandlerError(500, f"{' '.join(command[:4])} failed ({process.returncode}): {tail}")
    return process.returncode or 0, output


@contextlib.asynccontextmanager
async def _file_lock(path: Path) -> AsyncIterator[None]:
    """Several copies of one model may start at once; one installs, the others wait and reuse it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        await asyncio.to_thread(fcntl.flock, handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
