"""The serving benchmark's markdown report: per comparison, a table of every server's numbers (median and range
over repeats) and a table of ratios, both of the medians and per repeat (paired: the two runs of a pair ran side by
side, under the same noise), with pier bench's own statistics (`pier.bench.compare`)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from common import omp_policy
from measure import Arm, Runs, Shape
from peers import CONTEXT, PARALLEL, PREFIX_CONTEXT, THREADS

from pier.bench.compare import KEY_METRICS, paired_ratios, ratio_of_medians, spread
from pier.bench.metrics import Metrics

Metric = Callable[[Metrics], float]
_KEY = {key.name: key.value for key in KEY_METRICS}
COLUMNS: tuple[tuple[str, Metric], ...] = (
    ("output tok/s", _KEY["output_throughput"]),
    ("req/s", _KEY["request_throughput"]),
    ("TTFT p50 ms", _KEY["p50_ttft_ms"]),
    ("TTFT p99 ms", _KEY["p99_ttft_ms"]),
    ("TPOT p50 ms", _KEY["p50_tpot_ms"]),
    ("ITL p50 ms", _KEY["p50_itl_ms"]),
)
TOKS: Metric = COLUMNS[0][1]
TTFT: Metric = COLUMNS[2][1]


def num(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def values(runs: Runs, label: str, c: int, metric: Metric) -> list[float]:
    """One arm's metric at one level, one value per repeat."""
    return [metric(m) for m in runs[(label, c)]]


def ranged(samples: Sequence[float], scale: float = 1.0, percent: bool = False) -> str:
    """Median (min–max) of the samples times `scale`, as numbers or percentages."""
    s = spread([v * scale for v in samples])
    shown = (lambda v: f"{v:.0%}") if percent else num
    return f"{shown(s.median)} ({shown(s.low)}–{shown(s.high)})"


def span(ratios: Sequence[float]) -> str:
    """min–max of ratios, or n/a for none."""
    if not ratios:
        return "n/a"
    s = spread(ratios)
    return f"{s.low:.2f}–{s.high:.2f}"


def ratio(runs: Runs, a: str, b: str, c: int, metric: Metric) -> float:
    """a / b of the medians over repeats (NaN when b's is 0)."""
    r = ratio_of_medians(values(runs, a, c, metric), values(runs, b, c, metric))
    return float("nan") if r is None else r


def paired(runs: Runs, a: str, b: str, c: int, metric: Metric) -> list[float]:
    """a / b within each repeat: the two runs of a pair ran minutes apart at most, under the same noise."""
    return paired_ratios(values(runs, a, c, metric), values(runs, b, c, metric))


@dataclass(frozen=True)
class Check:
    target: str
    measured: str
    met: bool


@dataclass
class Section:
    title: str
    about: str
    commands: list[str]
    arms: list[Arm]
    levels: list[int]
    shape: Shape
    runs: Runs
    pairs: list[tuple[str, str]]  # (numerator, denominator) labels for the ratio table
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def results_table(section: Section) -> list[str]:
    lines = ["| c | server | " + " | ".join(name for name, _ in COLUMNS) + " |", "|---|---|" + "---|" * len(COLUMNS)]
    for c in section.levels:
        for arm in section.arms:
            cells = [ranged(values(section.runs, arm.label, c, metric)) for _, metric in COLUMNS]
            lines.append(f"| {c} | {arm.label} | " + " | ".join(cells) + " |")
    return lines


def ratio_table(section: Section) -> list[str]:
    lines = [
        "| c | ratio | output tok/s: of medians (per repeat, min–max) | TTFT p50: of medians (per repeat) |",
        "|---|---|---|---|",
    ]
    for c in section.levels:
        for a, b in section.pairs:
            cells = [
                f"{ratio(section.runs, a, b, c, metric):.2f}x ({span(paired(section.runs, a, b, c, metric))})"
                for metric in (TOKS, TTFT)
            ]
            lines.append(f"| {c} | {a} / {b} | " + " | ".join(cells) + " |")
    return lines


def render_section(section: Section) -> list[str]:
    s = section.shape
    prompt = f"{s.shared_prefix} shared + {s.input_len}" if s.shared_prefix else f"{s.input_len}"
    lines = [
        f"## {section.title}",
        "",
        section.about,
        "",
        f"Prompt {prompt} tokens ({'token ids' if s.ids else 'text of single-token words'}), "
        f"{s.output_len} output tokens; {section.seconds / 60:.1f} min.",
        "",
        "```",
    ]
    lines += [*section.commands, "```", "", *results_table(section), "", *ratio_table(section), ""]
    if section.checks:
        lines += ["| target | measured | |", "|---|---|---|"]
        lines += [f"| {k.target} | {k.measured} | {'met' if k.met else '**missed**'} |" for k in section.checks]
        lines.append("")
    return lines + [f"- {note}" for note in section.notes] + ([""] if section.notes else [])


def model_shape(path: Path) -> str:
    from gguf import GGUFReader

    fields = GGUFReader(path).fields

    def value(key: str) -> object:
        return fields[key].contents() if key in fields else "?"

    arch = value("general.architecture")
    keys = {
        "n_embd": "embedding_length",
        "n_layer": "block_count",
        "n_ff": "feed_forward_length",
        "n_head": "attention.head_count",
        "n_head_kv": "attention.head_count_kv",
    }
    shape = ", ".join(f"{name} {value(f'{arch}.{key}')}" for name, key in keys.items())
    vocab = len(fields["tokenizer.ggml.tokens"].data) if "tokenizer.ggml.tokens" in fields else "?"
    return f"`{path.name}` ({path.stat().st_size / 1e6:.0f} MB, {arch}: {shape}, n_vocab {vocab}; random weights)"


def machine() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "unknown CPU",
    )
    return f"{os.cpu_count()} × {cpu}, load average before start {os.getloadavg()[0]:.2f}"


def render_report(
    args: argparse.Namespace, model: Path, sections: list[Section], problems: list[str], seconds: float, complete: bool
) -> str:
    lines = [
        "# pier vs llama-server and llama-cpp-python's server",
        "",
        f"- model: {model_shape(model)}",
        f"- machine: {machine()}",
        f"- OMP_WAIT_POLICY for every server (except the omp comparison): {omp_policy()}",
        f"- every server: {THREADS} threads, {CONTEXT} KV cells in one unified cache ({PREFIX_CONTEXT} in the "
        f"shared-prefix and wide comparisons), {PARALLEL} parallel sequences (64 in the wide comparison), loopback",
        f"- client: pier bench (run_bench), OpenAI completions, streaming, ignore_eos, temperature 0; "
        f"max({args.requests}, 2·c) requests per run, {args.repeats} repeats, one warm-up run per server; "
        "cells are median (min–max) over repeats",
        f"- command: `{shlex.join(['python', *sys.argv])}`; took {seconds / 60:.1f} min"
        + ("" if complete else " (**interrupted**: partial results)"),
        "",
    ]
    for section in sections:
        lines += render_section(section)
    checks = [k for s in sections for k in s.checks]
    if checks:
        lines += (
            ["## Targets", ""]
            + [f"- {'met' if k.met else '**missed**'}: {k.target} — {k.measured}" for k in checks]
            + [""]
        )
    if problems:
        lines += ["## Failed requests", ""] + [f"- {p}" for p in problems] + [""]
    return "\n".join(lines)
