"""`GET /pier/metrics/summary`: what the console's live charts need, per workload (an inference component, or
`endpoint/variant`), computed from the same copy metrics `/metrics` serves (the engine's step times by kind too),
so the browser never parses Prometheus text. Counters and histograms stay cumulative (summed over the workload's
copies): the browser takes the rate and the percentiles of a window from two summaries, as Prometheus's rate()
and histogram_quantile() do."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from pier.backends.base import CopyStatus

GAUGES = {"pier_requests_in_flight": "in_flight", "pier_requests_running": "running",
          "pier_requests_waiting": "engine_waiting"}
COUNTERS = {"pier_generations_total": "generations", "pier_generated_tokens_total": "generated_tokens",
            "pier_prompt_tokens_total": "prompt_tokens"}
HISTOGRAMS = {"pier_time_to_first_token_seconds": "ttft", "pier_inter_token_latency_seconds": "itl"}
# The engine's steps by kind (engine/step_times.py): what a stream's gaps are made of, beside the ITL.
STEPS, STEP_KINDS = "pier_engine_step_seconds", ("decode", "mixed", "prompt")
KV_USAGE = "pier_kv_usage_ratio"
BUCKETED = (*HISTOGRAMS.values(), *(f"step_{kind}" for kind in STEP_KINDS))


@dataclass
class WorkloadSummary:
    copies: dict[str, int] = field(default_factory=dict)  # by state
    values: dict[str, float] = field(default_factory=dict)  # gauges and counters, summed over copies
    kv_usage: list[float] = field(default_factory=list)  # one ratio per reporting copy
    buckets: dict[str, dict[float, float]] = field(default_factory=dict)  # histogram -> le -> cumulative count

    def as_json(self, gateway_waiting: int) -> dict[str, Any]:
        values = {name: self.values.get(name, 0.0) for name in (*GAUGES.values(), *COUNTERS.values())}
        return {
            "copies": dict(sorted(self.copies.items())),
            **values,
            "gateway_waiting": gateway_waiting,
            "kv_usage": max(self.kv_usage, default=0.0),
            "kv_usage_mean": sum(self.kv_usage) / len(self.kv_usage) if self.kv_usage else 0.0,
            **{name: [[_le_text(le), count] for le, count in sorted(self.buckets.get(name, {}).items())]
               for name in BUCKETED},
        }


def summarize(copies: Sequence[CopyStatus], scraped: Iterable[tuple[CopyStatus, str]]) -> dict[str, WorkloadSummary]:
    """Per workload: its copies by state, and its ready copies' metrics added up. Pure."""
    workloads: dict[str, WorkloadSummary] = {}
    for copy in copies:
        entry = workloads.setdefault(copy.component, WorkloadSummary())
        entry.copies[copy.state.value] = entry.copies.get(copy.state.value, 0) + 1
    for copy, text in scraped:
        _add(workloads.setdefault(copy.component, WorkloadSummary()), text)
    return workloads


def summary_json(workloads: Mapping[str, WorkloadSummary], waiting: Mapping[str, int], now: float,
                 endpoint_of: Callable[[str], str | None] = lambda _: None) -> dict[str, Any]:
    """`endpoint_of`: the endpoint a workload serves, so the page can add an endpoint's workloads up."""
    return {"time": now, "workloads": {name: {"endpoint": endpoint_of(name), **entry.as_json(waiting.get(name, 0))}
                                       for name, entry in sorted(workloads.items())}}


def endpoint_of_workload(owners: Mapping[str, str]) -> Callable[[str], str | None]:
    """A classic endpoint's workload is `endpoint/variant`; a component's is its name, hosted by `owners[name]`."""
    def endpoint(workload: str) -> str | None:
        if "/" in workload:
            return workload.partition("/")[0]
        return owners.get(workload)

    return endpoint


def _add(entry: WorkloadSummary, text: str) -> None:
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError:  # not Prometheus text: this copy adds nothing
        return
    for family in families:
        for sample in family.samples:
            _add_sample(entry, sample.name, sample.labels, sample.value)


def _add_sample(entry: WorkloadSummary, name: str, labels: Mapping[str, str], value: float) -> None:
    key = GAUGES.get(name) or COUNTERS.get(name)
    if key is not None:
        entry.values[key] = entry.values.get(key, 0.0) + value
    elif name == KV_USAGE:
        entry.kv_usage.append(value)
    elif name.endswith("_bucket") and (key := _histogram(name.removesuffix("_bucket"), labels)) is not None:
        histogram = entry.buckets.setdefault(key, {})
        le = float(labels.get("le", "+Inf"))
        histogram[le] = histogram.get(le, 0.0) + value


def _histogram(family: str, labels: Mapping[str, str]) -> str | None:
    """The summary's name for a histogram's series: ttft, itl, step_<kind>; None for the others."""
    if family == STEPS:
        kind = labels.get("kind", "")
        return f"step_{kind}" if kind in STEP_KINDS else None
    return HISTOGRAMS.get(family)


def _le_text(le: float) -> float | str:
    """JSON has no infinity: the last bucket's bound reads "+Inf", as in Prometheus."""
    return "+Inf" if le == float("inf") else le
