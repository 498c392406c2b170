"""The benchmark scripts import each other as top-level modules (`from common import ...`), as when run from
benchmarks/: put that folder on the path so their tests can import them the same way."""

import sys
from pathlib import Path

BENCHMARKS = str(Path(__file__).resolve().parents[2] / "benchmarks")
if BENCHMARKS not in sys.path:
    sys.path.insert(0, BENCHMARKS)
