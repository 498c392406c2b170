"""GET /pier/metrics/summary: per workload, copies by state and the ready copies' metrics added up (pure part
table-driven; the route over a gateway with a fake backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from pier.backends.base import CopyState, CopyStatus
from pier.gateway.metrics_summary import WorkloadSummary, endpoint_of_workload, summarize, summary_json
from tests.gateway.served import Served, served
from tests.waiting import until

__all__ = ["served"]


def copy_text(*, generations: int, tokens: int, waiting: int, kv: float, ttft: tuple[int, int, int]) -> str:
    """A copy's /metrics as pier's model server writes it (ttft: cumulative counts at le 0.1, 0.5, +Inf)."""
    low, mid, total = ttft
    return f"""# HELP pier_generations Finished generations by how they ended.
# TYPE pier_generations counter
pier_generations_total{{outcome="stop"}} {generations}
pier_generations_total{{outcome="length"}} 1
# HELP pier_generated_tokens Tokens generated.
# TYPE pier_generated_tokens counter
pier_generated_tokens_total {tokens}
# HELP pier_requests_waiting Requests queued in the engine.
# TYPE pier_requests_waiting gauge
pier_requests_waiting {waiting}
# HELP pier_kv_usage_ratio Fraction of KV cells in use.
# TYPE pier_kv_usage_ratio gauge
pier_kv_usage_ratio {kv}
# HELP pier_time_to_first_token_seconds From request to its first generated token.
# TYPE pier_time_to_first_token_seconds histogram
pier_time_to_first_token_seconds_bucket{{le="0.1"}} {low}
pier_time_to_first_token_seconds_bucket{{le="0.5"}} {mid}
pier_time_to_first_token_seconds_bucket{{le="+Inf"}} {total}
pier_time_to_first_token_seconds_count {total}
pier_time_to_first_token_seconds_sum 1.5
"""


A = CopyStatus("ic-0-a", "ic", CopyState.READY, "http://a")
B = CopyStatus("ic-1-b", "ic", CopyState.READY, "http://b")
C = CopyStatus("ic-2-c", "ic", CopyState.RESTARTING)
D = CopyStatus("ep/AllTraffic-0-d", "ep/AllTraffic", CopyState.STARTING)
TEXT_A = copy_text(generations=3, tokens=30, waiting=1, kv=0.25, ttft=(1, 2, 4))
TEXT_B = copy_text(generations=5, tokens=70, waiting=0, kv=0.75, ttft=(0, 3, 3))


@pytest.mark.parametrize(("copies", "scraped", "workload", "expected"), [
    # two ready copies: counters and gauges summed, buckets summed per bound, KV the busiest and the mean
    ([A, B, C], [(A, TEXT_A), (B, TEXT_B)], "ic", {
        "copies": {"Ready": 2, "Restarting": 1}, "generations": 10.0, "generated_tokens": 100.0,
        "engine_waiting": 1.0, "kv_usage": 0.75, "kv_usage_mean": 0.5,
        "ttft": [[0.1, 1.0], [0.5, 5.0], ["+Inf", 7.0]], "itl": []}),
    # a copy whose text is not Prometheus adds nothing
    ([A, B], [(A, TEXT_A), (B, "not prometheus {")], "ic", {
        "copies": {"Ready": 2}, "generations": 4.0, "generated_tokens": 30.0, "kv_usage": 0.25,
        "ttft": [[0.1, 1.0], [0.5, 2.0], ["+Inf", 4.0]]}),
    # a workload none of whose copies is ready: its copies by state, zeros
    ([D], [], "ep/AllTraffic", {
        "copies": {"Starting": 1}, "generations": 0.0, "in_flight": 0.0, "kv_usage": 0.0, "ttft": []}),
])
def test_summarize(copies: list[CopyStatus], scraped: list[tuple[CopyStatus, str]], workload: str,
                   expected: dict[str, object]) -> None:
    summary = summarize(copies, scraped)[workload].as_json(gateway_waiting=2)
    assert summary["gateway_waiting"] == 2
    assert {key: summary[key] for key in expected} == expected


STEPS_TEXT = """# HELP pier_engine_step_seconds One engine step, by what it carried.
# TYPE pier_engine_step_seconds histogram
pier_engine_step_seconds_bucket{kind="decode",le="0.002"} 8.0
pier_engine_step_seconds_bucket{kind="decode",le="+Inf"} 10.0
pier_engine_step_seconds_count{kind="decode"} 10.0
pier_engine_step_seconds_sum{kind="decode"} 0.03
pier_engine_step_seconds_bucket{kind="mixed",le="0.002"} 0.0
pier_engine_step_seconds_bucket{kind="mixed",le="+Inf"} 3.0
pier_engine_step_seconds_bucket{kind="other",le="+Inf"} 99.0
"""


def test_the_engine_s_steps_are_summed_by_kind() -> None:
    """The step histograms (engine/step_times.py) by kind, summed over the copies; a kind pier does not know of is
    left out, and a kind no step had is an empty list."""
    summary = summarize([A, B], [(A, TEXT_A + STEPS_TEXT), (B, TEXT_B + STEPS_TEXT)])["ic"].as_json(0)
    assert summary["step_decode"] == [[0.002, 16.0], ["+Inf", 20.0]]
    assert summary["step_mixed"] == [[0.002, 0.0], ["+Inf", 6.0]]
    assert summary["step_prompt"] == [] and "step_other" not in summary
    assert summary["ttft"] == [[0.1, 1.0], [0.5, 5.0], ["+Inf", 7.0]]  # the other histograms unchanged


def test_summary_json_names_every_workload_with_the_time() -> None:
    body = summary_json({"b": WorkloadSummary(), "a": WorkloadSummary()}, {"a": 3}, now=12.5)
    assert body["time"] == 12.5 and list(body["workloads"]) == ["a", "b"]
    assert body["workloads"]["a"]["gateway_waiting"] == 3 and body["workloads"]["b"]["gateway_waiting"] == 0
    assert body["workloads"]["a"]["endpoint"] is None


@pytest.mark.parametrize(("workload", "endpoint"), [
    ("chat-ic", "chat"),  # a component: its endpoint from the stored components
    ("classic/AllTraffic", "classic"),  # a classic endpoint's variant
    ("gone-ic", None),  # a component no longer stored
])
def test_each_workload_names_its_endpoint(workload: str, endpoint: str | None) -> None:
    body = summary_json({workload: WorkloadSummary()}, {}, now=1.0,
                        endpoint_of=endpoint_of_workload({"chat-ic": "chat"}))
    assert body["workloads"][workload]["endpoint"] == endpoint


def test_the_route_lists_each_workload_with_its_copies(served: Served, tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF" + bytes(64))
    deployed = (f"endpoint: e\ncomponents:\n  - name: w\n    model: {{data: {model}}}\n    copies: 2\n"
                "    cpus: 1\n    memory_mb: 256\n")
    until(lambda: httpx.post(served.url + "/pier/deploy", content=deployed).json()["waiting"] is None,
          what="deployed")

    def summary() -> dict[str, Any]:
        body: dict[str, Any] = httpx.get(served.url + "/pier/metrics/summary").json()
        return body

    until(lambda: summary()["workloads"].get("w", {}).get("copies") == {"Ready": 2}, what="two ready copies")
    body = summary()
    assert isinstance(body["time"], float)
    assert body["workloads"]["w"]["gateway_waiting"] == 0  # the fake copies answer no /metrics: zeros
    assert body["workloads"]["w"]["generations"] == 0 and body["workloads"]["w"]["ttft"] == []
    assert body["workloads"]["w"]["endpoint"] == "e"
