"""The setups `pier tune` tries on one instance: copies, threads per copy, and each copy's engine settings.

A candidate is what one deploy file says: `copies` copies of `threads` cores each (together at most the
instance's vCPUs), and the environment every copy runs with. The space is the product of the choices given,
minus what cannot fit, ordered so that a budget too small for all of them still tries the most different ones
first (copy/thread splits before the finer settings).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass

OMP_POLICIES = ("spin", "passive")  # spin: OpenMP's default (OMP_WAIT_POLICY unset)


@dataclass(frozen=True)
class Candidate:
    copies: int
    threads: int
    parallel: int
    batch_tokens: int = 512
    kv_type: str = "f16"
    prefix_cache: bool = True
    omp: str = "spin"

    @property
    def key(self) -> str:
        """A stable name for the state file and the endpoint: the same setup always has the same key."""
        text = ",".join(f"{k}={v}" for k, v in asdict(self).items())
        return hashlib.sha256(text.encode()).hexdigest()[:10]

    @property
    def label(self) -> str:
        parts = [f"{self.copies}x{self.threads}t", f"p{self.parallel}", f"b{self.batch_tokens}", self.kv_type]
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
    """The choices to combine; `vcpus` is the instance's."""

    vcpus: int
    parallel: Sequence[int] = (4, 8, 16)
    batch_tokens: Sequence[int] = (512,)
    kv_types: Sequence[str] = ("f16", "q8_0")
    prefix_cache: Sequence[bool] = (True,)
    omp: Sequence[str] = ("spin",)

    def splits(self) -> list[tuple[int, int]]:
        """(copies, threads) with copies x threads = the vCPUs: one big copy, many small ones, and the steps
        between (threads that divide the vCPUs, so no core sits idle)."""
        return [(self.vcpus // t, t) for t in range(self.vcpus, 0, -1) if self.vcpus % t == 0]

    def candidates(self) -> list[Candidate]:
        """Every combination, interleaved across splits so that any first n differ the most."""
        per_split = [
            [Candidate(c, t, p, b, k, pc, o) for p, b, k, pc, o in itertools.product(
                self.parallel, self.batch_tokens, self.kv_types, self.prefix_cache, self.omp)]
            for c, t in self.splits()
        ]
        return [c for group in itertools.zip_longest(*per_split) for c in group if c is not None]
