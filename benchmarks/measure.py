"""Measuring servers with pier bench's client (`run_bench`): one run, and interleaved repeats of several servers.

Each run: OpenAI completions API, streaming, token-id prompts drawn from the model's vocabulary (or text of
single-token words for a server that takes no ids), ignore_eos, temperature 0, fixed lengths; the seed picks the
prompts, so every server of a repeat gets the same ones.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from common import log
from rich.console import Console

import pier.bench.calibration
from pier.bench import Api, BenchOptions, PromptFormat, WorkloadKind, run_bench
from pier.bench.metrics import MS, Metrics
from pier.bench.vocabulary import TokenPool

# run_bench reads the GGUF's vocabulary on every call (~3 s here); a benchmark calls it once per run, so read it
# once: the pool, and so the prompts, are the same either way.
pier.bench.calibration.ids_from_gguf = functools.lru_cache(maxsize=None)(pier.bench.calibration.ids_from_gguf)


@dataclass(frozen=True)
class Arm:
    """One server as the benchmark sees it: its completions route, and the model name to send (None: any)."""

    label: str
    url: str
    model: str | None = None


@dataclass(frozen=True)
class Shape:
    input_len: int = 64
    output_len: int = 32
    shared_prefix: int = 0
    ids: bool = True


Runs = dict[tuple[str, int], list[Metrics]]  # (arm label, concurrency) -> one Metrics per repeat


@dataclass
class Measurer:
    model: Path
    requests: int
    repeats: int
    quiet: Console = field(default_factory=lambda: Console(file=io.StringIO()))
    problems: list[str] = field(default_factory=list)
    pool: TokenPool | None = None  # the prompt tokens of the comparison under way: every run must get the same

    def once(self, arm: Arm, shape: Shape, concurrency: int, requests: int, seed: int) -> Metrics:
        """One run of `requests` at closed-loop `concurrency`; the seed picks the prompts (same seed, same prompts)."""
        options = BenchOptions(
            target=arm.url,
            api=Api.OPENAI_COMPLETIONS,
            model=arm.model,
            concurrency=(concurrency,),
            requests=requests,
            warmup=0,
            repeats=1,
            timeout_s=180.0,
            seed=seed,
            workload=WorkloadKind.SHARED_PREFIX if shared_prefix(shape) else WorkloadKind.RANDOM,
            input_len=shape.input_len,
            output_len=shape.output_len,
            shared_prefix=shape.shared_prefix,
            prompt_format=PromptFormat.IDS if shape.ids else PromptFormat.TEXT,
            vocab=self.model if shape.ids else None,
            temperature=0.0,
            progress=False,
        )
        result = run_bench(options, self.quiet)
        if result.interrupted or not result.runs:
            raise KeyboardInterrupt("benchmark interrupted")
        run = result.runs[0]
        self.same_prompts(arm, result.targets[0].tokens.pool)
        if run.metrics.failed:
            why = sorted({f"{r.error_code}: {r.error_message}" for r in run.records if r.error_code is not None})
            self.problems.append(
                f"{arm.label} c={concurrency} seed {seed}: {run.metrics.failed} of "
                f"{run.metrics.started} requests failed ({'; '.join(why)})"
            )
        return run.metrics

    def same_prompts(self, arm: Arm, pool: TokenPool) -> None:
        """Text prompts are chosen through each server (run_bench checks words through the server's usage), so a
        server that reports no usage could get other words: then the comparison would not be like for like."""
        if self.pool is None:
            self.pool = pool
        elif (pool.kind, pool.ids, pool.words) != (self.pool.kind, self.pool.ids, self.pool.words):
            self.problems.append(
                f"{arm.label}: prompts drawn from other tokens ({pool.source}) than the other "
                f"servers' ({self.pool.source})"
            )

    def interleaved(self, arms: Sequence[Arm], shape: Shape, levels: Sequence[int]) -> Runs:
        """A warm-up run per server, then for each level: repeat 1 of every arm, repeat 2 of every arm, ..."""
        self.pool = None
        for arm in arms:
            self.once(arm, shape, min(4, max(levels)), 4, seed=10_000)
        runs: Runs = {}
        for c in levels:
            for repeat in range(self.repeats):
                for arm in arms:
                    metrics = self.once(arm, shape, c, max(self.requests, 2 * c), seed=repeat)
                    runs.setdefault((arm.label, c), []).append(metrics)
                    log(
                        f"c={c} #{repeat + 1} {arm.label}: {metrics.output_throughput:.1f} tok/s, "
                        f"TTFT p50 {metrics.ttft.median * MS:.0f} ms, {metrics.completed}/{metrics.started} ok"
                    )
        return runs


def shared_prefix(shape: Shape) -> bool:
    return shape.shared_prefix > 0
