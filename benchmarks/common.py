"""What the benchmark scripts share: the benchmark model, the peers' binaries, free ports, and process hygiene."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pier.synthetic.builder import ModelShape

PEERS_ENV = "PIER_PEERS_DIR"
MODEL_CACHE_ENV = "PIER_BENCH_MODEL_CACHE"
PEERS_HELP = (
    "Build llama.cpp's `llama-server` and `llama-batched-bench` from the sources that llama-cpp-python ships "
    "(its sdist's vendor/llama.cpp: `cmake -B build -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF && cmake --build "
    "build --target llama-server llama-batched-bench`; they land in build/bin), or, in the developers' checkout, run "
    "`bash ../shared/tools/build-llama-server.sh`, which builds them once and prints their folder."
)


def model_cache() -> Path:
    """Where the benchmark model is kept: $PIER_BENCH_MODEL_CACHE, else ~/.cache/pier/models."""
    given = os.environ.get(MODEL_CACHE_ENV)
    return Path(given).expanduser() if given else Path.home() / ".cache" / "pier" / "models"


def cached_model(file_name: str, shape: ModelShape, quant: str) -> Path:
    """A synthetic GGUF with random weights (speed does not depend on the values), built once into the cache."""
    from pier.synthetic.builder import build_gguf

    path = model_cache() / file_name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        log(f"building {path} (random weights) ...")
        build_gguf(path, shape, quant=quant)
    return path


def bench_model() -> Path:
    """The 360M-class Q4_0 model."""
    from pier.synthetic.builder import BENCH_360M

    return cached_model("bench-360m-q4_0.gguf", BENCH_360M, "Q4_0")


def parse_comparisons(parser: argparse.ArgumentParser, sections: Sequence[str]) -> argparse.Namespace:
    """The arguments, with --only and --levels (comma-separated) read into lists; unknown sections refused."""
    args = parser.parse_args()
    args.only = [name.strip() for name in args.only.split(",") if name.strip()]
    args.levels = [int(level) for level in args.levels.split(",")]
    if unknown := [name for name in args.only if name not in sections]:
        parser.error(f"--only: unknown {unknown}; choose from {', '.join(sections)}")
    return args


def add_peers_dir(parser: argparse.ArgumentParser) -> None:
    """The --peers-dir flag, for a script that runs llama.cpp's own programs."""
    parser.add_argument(
        "--peers-dir",
        help=f"folder holding llama.cpp's llama-server and llama-batched-bench (default: ${PEERS_ENV})",
    )


def peers_dir(given: str | Path | None = None) -> Path:
    """The folder of llama.cpp's binaries built from the sources llama-cpp-python ships: `given` (a script's
    --peers-dir), else $PIER_PEERS_DIR; exits with how to build them when neither names a folder."""
    value = given or os.environ.get(PEERS_ENV)
    if not value:
        raise SystemExit(f"llama.cpp's programs are needed: pass --peers-dir FOLDER or set {PEERS_ENV}.\n{PEERS_HELP}")
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise SystemExit(f"{folder} (from {'--peers-dir' if given else PEERS_ENV}) is not a folder.\n{PEERS_HELP}")
    return folder


def peer(name: str, given: str | Path | None = None) -> Path:
    """One of llama.cpp's programs (`llama-server`, `llama-batched-bench`) in the peers' folder."""
    path = peers_dir(given) / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise SystemExit(f"no program {name} in {path.parent}.\n{PEERS_HELP}")
    return path


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


def log(message: str) -> None:
    """A progress line on stderr, with the time of day (the report goes to stdout)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
