"""One copy's operating-system process: how it is started, recognised after a gateway restart, and stopped."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pier
from pier.backends.base import CopySpec
from pier.channel.copy_secret import COPY_SECRET_ENV

PIER_ROOT = str(Path(pier.__file__).resolve().parent.parent)


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on `host` right now. Another process may take it before the copy binds it; the copy then
    exits, and its restart picks a new port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # a Ray node may have an IPv6 address
    with socket.socket(family) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def http_url(host: str, port: int) -> str:
    """The URL of a server on `host`:`port`; an IPv6 address goes in brackets (RFC 3986), else the port would read
    as part of the address."""
    bare = host.strip("[]")
    return f"http://[{bare}]:{port}" if ":" in bare else f"http://{bare}:{port}"


def command(python: str, spec: CopySpec, port: int) -> list[str]:
    """The model server for `spec`, started through the launcher that pins it and ties it to this process."""
    server = [python, "-m", "pier.server.container", "--model", str(spec.model_dir), "--port", str(port),
              "--host", spec.host]
    if spec.cores:
        server += ["--threads", str(len(spec.cores))]
    cores = ",".join(str(core) for core in spec.cores)
    return [python, "-m", "pier.backends.launch", "--parent", str(os.getpid()), "--cores", cores, "--", *server]


# What a copy takes from the gateway's environment: what any process needs (PATH, HOME, the locale, a temp folder,
# Python's and the dynamic linker's paths), where caches live, how to reach a package index (a copy installs its
# model's code/requirements.txt), and the settings of pier, OpenMP and ggml that the user set on purpose. Nothing
# else: the gateway's credentials (AWS_*, HF_TOKEN, API keys, ...) stay in the gateway. A model that needs one
# names it in its own Environment block, as on SageMaker.
INHERITED = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "PYTHONPATH", "PYTHONHOME",
    "LD_LIBRARY_PATH", "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "XDG_CACHE_HOME",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR",
    "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_FIND_LINKS", "PIP_NO_INDEX", "PIP_CERT",
})
INHERITED_PREFIXES = ("LC_", "PIER_", "OMP_", "GGML_")
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "KEY", "CREDENTIAL")  # never inherited through a prefix


def inherited(name: str) -> bool:
    """Whether a copy takes the gateway's variable `name` (the model's Environment is given on top, whatever)."""
    if name in INHERITED:
        return True
    return name.startswith(INHERITED_PREFIXES) and not any(word in name.upper() for word in SECRET_WORDS)


# A copy whose code is a sourcedir.tar.gz on S3 (SAGEMAKER_SUBMIT_DIRECTORY=s3://..., as the `sagemaker` SDK
# uploads it) fetches it itself, as a SageMaker container does with its execution role: it gets the gateway's way
# to S3 (credentials, region, an S3-compatible store), and only such a copy does.
S3_ACCESS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
             "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_REGION", "AWS_DEFAULT_REGION",
             "AWS_ENDPOINT_URL_S3", "AWS_CA_BUNDLE")


def fetches_code_from_s3(spec: CopySpec) -> bool:
    return spec.environment.get("SAGEMAKER_SUBMIT_DIRECTORY", "").strip().startswith("s3://")


def environment(spec: CopySpec, parent: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the copy's process runs with: the part of the gateway's environment a copy needs (`inherited`, plus
    the way to S3 for a copy that fetches its own code), then the model's Environment block, then the GPUs it holds
    (`gpu_environment`); pier stays importable in the copy."""
    parent = os.environ if parent is None else parent
    wanted = inherited if not fetches_code_from_s3(spec) else (lambda name: inherited(name) or name in S3_ACCESS)
    env = {**{k: v for k, v in parent.items() if wanted(k)}, **spec.environment}
    env.pop(CPU_FALLBACK_ENV, None)  # only pier says a copy is one
    env |= gpu_environment(spec)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([*paths, PIER_ROOT] if PIER_ROOT not in paths else paths)
    env["PYTHONUNBUFFERED"] = "1"  # its log is read while it runs
    return env


GPU_COUNT_ENV = "PIER_GPUS"  # how many GPUs the copy holds; the engine offloads to them when there are any
CPU_FALLBACK_ENV = "PIER_CPU_FALLBACK"  # "1": it asked for GPUs this host lacks and runs on CPU (--cpu-fallback)


def gpu_environment(spec: CopySpec) -> dict[str, str]:
    """The GPUs a copy may see: exactly those it holds (CUDA_VISIBLE_DEVICES="" hides every GPU from a copy that
    holds none, so a CUDA build of llama.cpp runs it on CPU), numbered in PCI bus order as pier's inventory numbers
    them. Set over the model's Environment: two copies never share a GPU by a setting of their own."""
    env = {"CUDA_VISIBLE_DEVICES": ",".join(spec.gpus), "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
           GPU_COUNT_ENV: str(len(spec.gpus))}
    return env | ({CPU_FALLBACK_ENV: "1"} if spec.cpu_fallback else {})


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


@dataclass(frozen=True)
class PidFile:
    """Which process a copy ran as (pid and kernel start time), so a later gateway can recognise it."""

    path: Path

    def write(self, pid: int) -> None:
        self.path.write_text(f"{pid} {start_time(pid)}\n")

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    def kill_survivor(self) -> int | None:
        """SIGKILL the copy an earlier gateway left running, if it still is; its pid, or None."""
        try:
            pid_text, started = self.path.read_text().split()
            pid = int(pid_text)
        except (OSError, ValueError):
            return None
        finally:
            self.clear()
        if start_time(pid) != started:  # gone, or the pid now belongs to another process
            return None
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return None
        return pid


def start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot ("" when it is gone): with the pid, a unique name."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]  # field 22; the command name before ")" may hold spaces


class CopyProcess:
    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process

    @classmethod
    def spawn(cls, spec: CopySpec, port: int, log: Path, *, python: str = sys.executable,
              secret: str | None = None) -> CopyProcess:
        """`secret`: the copy answers only requests that carry it (pier.channel.copy_secret)."""
        env = {**environment(spec), **({COPY_SECRET_ENV: secret} if secret else {})}
        with log.open("ab") as out:
            process = subprocess.Popen(
                command(python, spec, port), env=env, cwd=log.parent, stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT,
                # Its own session: a Ctrl-C meant for the gateway must not reach the copy behind stop()'s back.
                start_new_session=True,
            )
        return cls(process)

    @property
    def pid(self) -> int:
        return self._process.pid

    def poll(self) -> int | None:
        return self._process.poll()

    def kill(self) -> None:
        if self._process.poll() is None:
            self._process.kill()

    async def stop(self, grace_s: float) -> int:
        """SIGTERM (the model server drains its requests), then SIGKILL after `grace_s`; the exit code."""
        if self._process.poll() is None:
            self._process.terminate()
            if await self.wait(grace_s) is None:
                self._process.kill()
        code = await self.wait(5.0)
        return code if code is not None else self._process.wait()

    async def wait(self, timeout_s: float) -> int | None:
        """The exit code once it has exited, or None if it still runs after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while (code := self._process.poll()) is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return code
