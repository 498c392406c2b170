"""What the benchmark scripts share: the benchmark model, the peers' binaries, free ports, and process hygiene."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEERS_SCRIPT = ROOT.parent / "shared" / "tools" / "build-llama-server.sh"
MODEL_CACHE = Path.home() / ".cache" / "pier" / "models"


def bench_model() -> Path:
    """The 360M-class Q4_0 model with random weights (speed does not depend on the values), built once."""
    from pier.model.synthetic import BENCH_360M, build_gguf

    path = MODEL_CACHE / "bench-360m-q4_0.gguf"
    if not path.exists():
        MODEL_CACHE.mkdir(parents=True, exist_ok=True)
        print(f"building {path} (random weights) ...", file=sys.stderr)
        build_gguf(path, BENCH_360M, quant="Q4_0")
    return path


def peers_dir() -> Path:
    """The folder of llama.cpp's binaries built from the sources llama-cpp-python ships (built once, then cached)."""
    out = subprocess.run(["bash", str(PEERS_SCRIPT)], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def free_port() -> int:
    """A loopback port nobody listens on right now (the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def raise_on_sigterm() -> None:
    """Turn SIGTERM into KeyboardInterrupt, so the `finally` blocks that stop servers run for it as for Ctrl-C."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)


def omp_policy(env: dict[str, str] | None = None) -> str:
    return (os.environ if env is None else env).get("OMP_WAIT_POLICY", "(unset: OpenMP's default spin-then-sleep)")
