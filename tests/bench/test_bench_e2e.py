"""`pier bench` against a live pier model server on a TINY GGUF: every field of the results, the plots, and
each API flavor and workload, with tiny loads (few requests, short outputs) bounded in time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pier.bench import BenchOptions, BenchResult, run_bench
from pier.bench.metrics import PERCENTILES
from pier.bench.report import REQUESTS_FILE, SUMMARY_FILE

pytestmark = pytest.mark.e2e

INPUT_LEN = 12
OUTPUT_LEN = 4
REQUESTS = 4
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SMALLEST_PLOT_BYTES = 10_000  # two labelled panels; an empty canvas is a few kB

LLMPERF_DISTRIBUTIONS = (
    "inter_token_latency_s",
    "ttft_s",
    "end_to_end_latency_s",
    "request_output_throughput_token_per_s",
    "number_input_tokens",
    "number_output_tokens",
)
LLMPERF_FIELDS = {
    f"results_{name}_{stat}"
    for name in LLMPERF_DISTRIBUTIONS
    for stat in [*(f"quantiles_p{p}" for p in PERCENTILES), "mean", "min", "max", "stddev"]
} | {
    "results_num_requests_started",
    "results_error_rate",
    "results_number_errors",
    "results_error_code_frequency",
    "results_mean_output_throughput_token_per_s",
    "results_num_completed_requests",
    "results_num_completed_requests_per_min",
    "model",
    "mean_input_tokens",
    "stddev_input_tokens",
    "mean_output_tokens",
    "stddev_output_tokens",
    "num_concurrent_requests",
}
VLLM_FIELDS = {
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
} | {
    f"{stat}_{name}_ms"
    for name in ("ttft", "tpot", "itl", "e2el")
    for stat in ["mean", "median", "std", *(f"p{p}" for p in PERCENTILES)]
}
PIER_FIELDS = {
    "target",
    "url",
    "api",
    "mode",
    "level",
    "repeat",
    "started_at",
    "workload",
    "shared_prefix_tokens",
    "turns",
    "request_rate",
    "rate_schedule",
    "copies",
    "success_rate",
    "errors_by_code",
    "good_requests",
    "output_tokens_source",
    "input_tokens_source",
    "cost_per_million_output_tokens_usd",
    "engine_steps",
}
REQUEST_FIELDS = {
    "target",
    "mode",
    "level",
    "repeat",
    "index",
    "conversation",
    "turn",
    "start_s",
    "error_code",
    "error_msg",
    "ttft_s",
    "end_to_end_latency_s",
    "inter_token_latency_s",
    "e2el_s",
    "tpot_s",
    "itl_s",
    "number_input_tokens",
    "number_output_tokens",
    "number_total_tokens",
    "request_output_throughput_token_per_s",
    "input_tokens_source",
    "output_tokens_source",
}


def bench(target: str, **fields: Any) -> BenchResult:
    defaults: dict[str, Any] = {
        "requests": REQUESTS,
        "input_len": INPUT_LEN,
        "output_len": OUTPUT_LEN,
        "warmup": 1,
        "timeout_s": 30,
        "progress": False,
    }
    return run_bench(BenchOptions(target=target, **(defaults | fields)))


def test_summary_json_has_every_field(pier_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIER_FAKE_GPUS", "0")
    result = bench(pier_server, concurrency=(1, 2), out=tmp_path, instance_type="ml.g5.2xlarge", slo_ttft_ms=10_000)
    assert result.ok
    summary = json.loads((tmp_path / SUMMARY_FILE).read_text())
    assert set(summary) == {
        "version",
        "pier_version",
        "name",
        "timestamp",
        "interrupted",
        "options",
        "targets",
        "price",
        "device",
        "cpu",
        "kernels",
        "runs",
        "comparisons",
    }
    assert "llama_print_system_info: CPU :" in summary["cpu"]  # which kernels this build could run
    assert list(summary["kernels"].values()) == [None]  # a lone model server, not a gateway: no /pier/copies
    assert summary["device"] == {"kind": "cpu", "gpus": [], "memory_mb": [], "description": "no GPUs",
                                 "source": "PIER_FAKE_GPUS"}  # the test's host, made GPU-less (fixture below)
    assert summary["interrupted"] is False
    assert summary["options"]["concurrency"] == [1, 2] and "api_key" not in summary["options"]
    (target,) = summary["targets"]
    assert target | {"url": None} == {
        "label": pier_server.removeprefix("http://"),
        "url": None,
        "api": "openai-completions",
        "model": "pier-synthetic",
        "prompt_format": "ids",  # the completions API takes ids, and the copy's /tokenize gives them
        "prompt_source": "the word list through /tokenize",
        "prompt_overhead_tokens": 0,
        "prompt_tokens_verified": True,
        "warmup_errors": {},
    }
    assert "ml.g5.2xlarge" in summary["price"]["source"]
    assert [(run["mode"], run["level"]) for run in summary["runs"]] == [("concurrency", 1), ("concurrency", 2)]
    for run in summary["runs"]:
        assert set(run) == LLMPERF_FIELDS | VLLM_FIELDS | PIER_FIELDS
        check_run(run)
    assert summary["comparisons"] == []


def check_run(run: dict[str, Any]) -> None:
    assert run["results_num_requests_started"] == run["results_num_completed_requests"] == run["completed"] == REQUESTS
    assert (run["results_number_errors"], run["failed"], run["results_error_rate"]) == (0, 0, 0.0)
    assert run["results_error_code_frequency"] == run["errors_by_code"] == {}
    assert run["success_rate"] == 1.0
    assert run["good_requests"] == REQUESTS  # every request within the 10 s TTFT objective
    assert run["request_goodput"] == pytest.approx(run["request_throughput"])
    # the server's usage: the prompt's token ids exactly (no BOS added to ids), and the output asked for (ignore_eos)
    assert run["results_number_input_tokens_mean"] == run["results_number_input_tokens_max"] == INPUT_LEN
    assert run["results_number_output_tokens_min"] == run["results_number_output_tokens_max"] == OUTPUT_LEN
    assert (run["input_tokens_source"], run["output_tokens_source"]) == ("usage", "usage")
    assert run["total_output_tokens"] == REQUESTS * OUTPUT_LEN
    assert run["total_input_tokens"] == REQUESTS * INPUT_LEN
    assert run["duration"] > 0
    assert run["output_throughput"] == pytest.approx(run["total_output_tokens"] / run["duration"])
    assert run["results_mean_output_throughput_token_per_s"] == pytest.approx(run["output_throughput"])
    assert run["request_throughput"] == pytest.approx(REQUESTS / run["duration"])
    assert run["results_num_completed_requests_per_min"] == pytest.approx(60 * run["request_throughput"])
    assert run["total_token_throughput"] == pytest.approx(
        (run["total_input_tokens"] + run["total_output_tokens"]) / run["duration"]
    )
    assert run["cost_per_million_output_tokens_usd"] > 0
    assert (run["num_concurrent_requests"], run["request_rate"]) == (int(run["level"]), None)
    for name in ("ttft", "tpot", "itl", "e2el"):
        values = [run[f"p{p}_{name}_ms"] for p in PERCENTILES]
        assert values == sorted(values) and values[0] >= 0, name
        assert run[f"median_{name}_ms"] == run[f"p50_{name}_ms"]
    assert 0 < run["median_ttft_ms"] <= run["median_e2el_ms"]
    assert run["results_ttft_s_mean"] * 1000 == pytest.approx(run["mean_ttft_ms"])
    # llmperf's end-to-end latency runs to the end of the stream, vLLM's to the last token
    assert run["results_end_to_end_latency_s_mean"] * 1000 >= run["mean_e2el_ms"]
    # the copy's own engine steps over this run alone (its /metrics before and after): every request's prompt in
    # a step of its own or beside another's stream, and its other tokens in decode steps. A step is timed just
    # after its tokens go out, so the last one before either scrape may fall on the other side of it: +-1.
    steps = run["engine_steps"]["step"]
    assert steps["prompt"]["steps"] + steps["mixed"]["steps"] >= 1
    decode_low = REQUESTS * (OUTPUT_LEN - 1) // int(run["level"]) - 1
    assert decode_low <= steps["decode"]["steps"] <= REQUESTS * (OUTPUT_LEN - 1) + 1
    assert 0 < steps["decode"]["p50_ms"] <= steps["decode"]["p99_ms"]


def test_per_request_json_and_plots(pier_server: str, tmp_path: Path) -> None:
    bench(pier_server, concurrency=(1, 2), out=tmp_path)
    requests = json.loads((tmp_path / REQUESTS_FILE).read_text())
    assert len(requests) == 2 * REQUESTS
    for request in requests:
        assert set(request) == REQUEST_FIELDS
        assert request["error_code"] is None and request["error_msg"] == ""
        assert request["number_output_tokens"] == OUTPUT_LEN
        assert len(request["itl_s"]) <= OUTPUT_LEN - 1
        assert 0 < request["ttft_s"] <= request["e2el_s"] <= request["end_to_end_latency_s"]
        assert request["number_total_tokens"] == request["number_input_tokens"] + OUTPUT_LEN
    for name in ("throughput_vs_concurrency.png", "latency_vs_throughput.png"):
        png = (tmp_path / name).read_bytes()
        assert png.startswith(PNG_MAGIC) and len(png) > SMALLEST_PLOT_BYTES, name


@pytest.mark.parametrize(
    ("fields", "overhead"),
    [
        ({"api": "openai-chat"}, 18),  # ChatML around one user message in the TINY vocabulary
        ({"api": "tgi"}, 1),
        ({"api": "sagemaker", "payload": "openai-completions"}, 0),  # token ids from the copy's /tokenize
        ({"api": "sagemaker", "payload": "tgi"}, 1),
    ],
)
def test_every_api_flavor(pier_server: str, fields: dict[str, Any], overhead: int) -> None:
    result = bench(pier_server, requests=2, **fields)
    (run,) = result.runs
    assert run.metrics.completed == 2, run.metrics.errors_by_code
    assert result.targets[0].tokens.overhead == overhead
    assert all(r.input_tokens == INPUT_LEN + overhead and r.input_tokens_source == "usage" for r in run.records)


def test_shared_prefix_and_multi_turn_workloads(pier_server: str) -> None:
    shared = bench(pier_server, workload="shared-prefix", shared_prefix=40, requests=3)
    assert {r.input_tokens for r in shared.runs[0].records} == {40 + INPUT_LEN}  # token ids: no BOS
    chat = bench(pier_server, api="openai-chat", workload="multi-turn", turns=3, requests=3)
    records = chat.runs[0].records
    assert [r.round for r in records] == [0, 1, 2]
    assert records[0].input_tokens < records[1].input_tokens < records[2].input_tokens  # each round extends the last


def test_open_loop_rate_and_duration_bound(pier_server: str) -> None:
    result = bench(pier_server, rates=(20.0,), requests=None, duration_s=0.5)
    (run,) = result.runs
    assert run.level.mode == "rate" and run.metrics.completed >= 1
    assert run.metrics.duration_s < 0.5 + 5.0  # the deadline plus the last answers


def test_compare_runs_interleaved_and_reports_ratios(pier_server: str, tmp_path: Path) -> None:
    result = bench(pier_server, compare=pier_server + "/v1/chat/completions", requests=2, out=tmp_path)
    assert [(r.target.label[0], r.repeat) for r in result.runs] == [("A", 0), ("B", 0), ("A", 1), ("B", 1)]
    (level,) = result.comparisons
    throughput = next(m for m in level.metrics if m.name == "output_throughput")
    assert throughput.ratio == pytest.approx(throughput.b.median / throughput.a.median)
    summary = json.loads((tmp_path / SUMMARY_FILE).read_text())
    assert summary["comparisons"][0]["metrics"][0]["ratio_b_over_a"] == pytest.approx(throughput.ratio)


def test_token_id_prompts_from_the_gguf_are_exact(pier_server: str, tiny_gguf: Path) -> None:
    result = bench(pier_server, vocab=tiny_gguf, requests=2)
    assert result.targets[0].tokens.pool.kind == "ids"
    # ids are used as given: no BOS, so the server counts exactly the planned length
    assert {(r.input_tokens, r.input_tokens_source) for r in result.runs[0].records} == {(INPUT_LEN, "usage")}
