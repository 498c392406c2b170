"""What `pier tune` shows and leaves behind: a table of every candidate (goodput per instance with its spread,
cost per million tokens, latencies), a plot of goodput against TTFT, and the winner as a deploy file."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from rich.table import Table

from pier.bench.metrics import cost_per_million_tokens
from pier.bench.pricing import Price
from pier.tune.halving import Standing, rank, within_noise
from pier.tune.space import Recipe
from pier.tune.trial import Setup
from pier.tune.trials import Trial


@dataclass(frozen=True)
class RecipeRow:
    candidate: Recipe
    standing: Standing
    trials: Sequence[Trial]

    def figure(self, name: str) -> float:
        values = [t.figures[name] for t in self.trials if name in t.figures]
        return statistics.median(values) if values else 0.0

    @property
    def met(self) -> int:
        return sum(1 for t in self.trials if not t.misses)


def rows(standings: Sequence[Standing], candidates: Sequence[Recipe], trials: Sequence[Trial]) -> list[RecipeRow]:
    """Best first; only candidates with at least one trial."""
    by_key = {c.key: c for c in candidates}
    return [RecipeRow(by_key[s.key], s, [t for t in trials if t.candidate.key == s.key]) for s in rank(standings)]


def spread(values: Sequence[float]) -> str:
    if not values:
        return "–"
    median = statistics.median(values)
    return f"{median:.1f}" if len(values) == 1 else f"{median:.1f} ({min(values):.1f}–{max(values):.1f})"


def table(ranked: Sequence[RecipeRow], price: Price | None) -> Table:
    table = Table(title="pier tune: candidates, best first (median over trials, min–max)")
    for name in ("setup", "trials", "met SLO", "goodput tok/s", "output tok/s", "TTFT p90 ms", "TPOT p90 ms",
                 "USD / M tokens"):
        table.add_column(name, justify="left" if name == "setup" else "right")
    for row in ranked:
        cost = cost_per_million_tokens(price.usd_per_hour, row.standing.goodput) if price else None
        table.add_row(row.candidate.label, str(len(row.trials)), f"{row.met}/{len(row.trials)}",
                      spread(row.standing.goodputs), spread(row.standing.throughputs),
                      f"{row.figure('ttft_p90_ms'):.0f}", f"{row.figure('tpot_p90_ms'):.0f}",
                      "–" if cost is None else f"{cost:.2f}")
    return table


def verdict(ranked: Sequence[RecipeRow]) -> str:
    if not ranked or ranked[0].standing.goodput <= 0:
        return "No candidate met the SLO in its trials: loosen the SLO, lighten the workload, or use a larger instance."
    first = ranked[0]
    line = f"Winner: {first.candidate.label}, {first.standing.goodput:.1f} output tok/s within the SLO"
    if len(ranked) > 1 and within_noise(first.standing, ranked[1].standing):
        line += (f"; {ranked[1].candidate.label} reached it in one of its trials, so the order of these two is "
                 "within this host's noise")
    return line + "."


def plot(ranked: Sequence[RecipeRow], path: Path) -> Path:
    """Goodput per instance against TTFT p90, one point per candidate (labelled), SLO misses hollow."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    for row in ranked:
        met = row.standing.goodput > 0
        y = row.standing.goodput if met else row.standing.throughput
        axes.scatter(row.figure("ttft_p90_ms"), y, facecolors="C0" if met else "none", edgecolors="C0")
        axes.annotate(row.candidate.label, (row.figure("ttft_p90_ms"), y), fontsize=7, xytext=(3, 3),
                      textcoords="offset points")
    axes.set_xlabel("TTFT p90 (ms)")
    axes.set_ylabel("output tok/s per instance (hollow: missed the SLO)")
    axes.set_title("pier tune")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def write_deploy_file(path: Path, endpoint: str, setup: Setup, winner: Recipe) -> Path:
    """The winner as a deploy file `pier deploy` takes (the model's path made absolute, so it works anywhere)."""
    file = setup.deploy_file(endpoint, winner)
    data = file.model_dump(exclude_none=True)
    for component in data["components"]:
        source = component["model"]["data"]
        if "://" not in source:
            component["model"]["data"] = str(Path(source).resolve())
    header = f"# written by pier tune: {winner.label}\n"
    path.write_text(header + yaml.safe_dump(data, sort_keys=False))
    return path
