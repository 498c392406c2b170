"""The setups `pier tune` tries on one instance: copies, threads per copy, and each copy's engine settings.

A candidate is what one deploy file says: `copies` copies of `threads` cores each (together at most the
instance's vCPUs) and, on an instance with GPUs, `gpus` GPUs each (together all of the instance's: copies x GPUs
is the split that matters there), and the environment every copy runs with. The space is the product of the
choices given, minus what cannot fit, ordered so that a budget too small for all of them still tries the most
different ones first (copy/thread splits before the finer settings).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass

OMP_POLICIES = ("spin", "passive")  # spin: OpenMP's default (OMP_WAIT_POLICY unset)


@dataclass(frozen=True)
class Recipe:
    copies: int
    threads: int
    parallel: int
    batch_tokens: int = 512
    kv_type: str = "f16"
    prefix_cache: bool = True
    omp: str = "spin"
    gpus: int = 0  # GPUs per copy (NumberOfAcceleratorDevicesRequired); 0: it computes on its cores

    @property
    def key(self) -> str:
        """A stable name for the state file and the endpoint: the same setup always has the same key (a CPU setup
        the one it had before GPUs were searched)."""
        fields = {k: v for k, v in asdict(self).items() if k != "gpus" or v}
        text = ",".join(f"{k}={v}" for k, v in fields.items())
        return hashlib.sha256(text.encode()).hexdigest()[:10]

    @property
    def label(self) -> str:
        split = f"{self.copies}x{self.threads}t" + (f"/{self.gpus}g" if self.gpus else "")
        parts = [split, f"p{self.parallel}", f"b{self.batch_tokens}", self.kv_type]
        if not self.prefix_cache:
            parts.append("nocache")
        if self.omp != "spin":
            parts.append(self.omp)
        return " ".join(parts)

    @property
    def concurrency(self) -> int:
        """Users the instance serves at once: every copy's parallel sequences busy."""
        return self.copies * self.parallel

    def environment(self, context: int) -> dict[str, str]:
        """A copy's environment for this setup (its threads come from the cores it is given)."""
        env = {"PIER_PARALLEL": str(self.parallel), "PIER_BATCH_TOKENS": str(self.batch_tokens),
               "MAX_BATCH_TOTAL_TOKENS": str(context), "PIER_KV_CACHE_TYPE": self.kv_type,
               "PIER_PREFIX_CACHE": "true" if self.prefix_cache else "false"}
        if self.omp != "spin":
            env["OMP_WAIT_POLICY"] = self.omp
        return env


@dataclass(frozen=True)
class Space:
    """The choices to combine; `vcpus` and `gpus` are the instance's."""

    vcpus: int
    parallel: Sequence[int] = (4, 8, 16)
    batch_tokens: Sequence[int] = (512,)
    kv_types: Sequence[str] = ("f16", "q8_0")
    prefix_cache: Sequence[bool] = (True,)
    omp: Sequence[str] = ("spin",)
    gpus: int = 0

    def splits(self) -> list[tuple[int, int]]:
        """(copies, threads) with copies x threads = the vCPUs: one big copy, many small ones, and the steps
        between (threads that divide the vCPUs, so no core sits idle)."""
        return [(self.vcpus // t, t) for t in range(self.vcpus, 0, -1) if self.vcpus % t == 0]

    def layouts(self) -> list[tuple[int, int, int]]:
        """(copies, threads, GPUs per copy). Without GPUs, the splits of the vCPUs; with them, copies x GPUs: one
        copy on every GPU, one copy per GPU, and the steps between, each copy with its share of the vCPUs."""
        if not self.gpus:
            return [(c, t, 0) for c, t in self.splits()]
        return [(self.gpus // g, max(1, self.vcpus // (self.gpus // g)), g)
                for g in range(self.gpus, 0, -1) if self.gpus % g == 0]

    def candidates(self) -> list[Recipe]:
        """Every combination, interleaved across layouts so that any first n differ the most."""
        per_split = [
            [Recipe(c, t, p, b, k, pc, o, g) for p, b, k, pc, o in itertools.product(
                self.parallel, self.batch_tokens, self.kv_types, self.prefix_cache, self.omp)]
            for c, t, g in self.layouts()
        ]
        return [c for group in itertools.zip_longest(*per_split) for c in group if c is not None]
