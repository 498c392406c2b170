"""The console's pure helpers (console/src/*.js), run from their sources in Chromium, table-driven: rates and
windowed percentiles, SSE and AWS event-stream parsing, the playground's requests and snippets, bench summaries."""

from __future__ import annotations

import json
import mimetypes
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pier.runtime.eventstream import StreamErrorCode, model_stream_error, payload_part
from tests.console.browser import chromium, missing

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))

SOURCES = Path(__file__).resolve().parents[2] / "console" / "src"
ORIGIN = "http://console.test"


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    """A page on a made-up origin whose files are the console's sources, so `import()` loads them as they are."""
    with chromium() as browser:
        opened = browser.new_page()

        def serve(route: Any) -> None:
            name = route.request.url.removeprefix(ORIGIN + "/")
            path = SOURCES / name
            if name == "index.html":
                route.fulfill(body="<!doctype html><title>helpers</title>", content_type="text/html")
            elif path.is_file() and path.resolve().is_relative_to(SOURCES):
                kind = "text/javascript" if path.suffix == ".js" else mimetypes.guess_type(path.name)[0]
                route.fulfill(body=path.read_bytes(), content_type=kind or "text/plain")
            else:
                route.fulfill(status=404, body="")

        opened.route(f"{ORIGIN}/**", serve)
        opened.goto(f"{ORIGIN}/index.html")
        yield opened


def call(page: Any, module: str, function: str, *args: Any) -> Any:
    """`function(...args)` of console/src/<module>, awaited; its value as JSON."""
    return page.evaluate("""async ([module, fn, args]) => {
        const m = await import(`/${module}`);
        return JSON.parse(JSON.stringify(await m[fn](...args)));
    }""", [module, function, list(args)])


BUCKETS = [[0.1, 1], [0.5, 5], ["+Inf", 7]]


@pytest.mark.parametrize(("buckets", "q", "expected"), [
    (BUCKETS, 0.5, 0.35),  # rank 3.5 falls in (0.1, 0.5], 2.5 of its 4 observations in
    (BUCKETS, 0.1, 0.07),  # in the first bucket, from 0
    (BUCKETS, 0.99, 0.5),  # in +Inf: the highest finite bound
    ([[0.1, 0], ["+Inf", 0]], 0.5, None),  # nothing observed
    ([], 0.5, None),
])
def test_quantile(page: Any, buckets: list[list[Any]], q: float, expected: float | None) -> None:
    value = call(page, "rates.js", "quantile", buckets, q)
    assert value == pytest.approx(expected) if expected is not None else value is None


@pytest.mark.parametrize(("previous", "current", "seconds", "expected"), [
    (4, 10, 2, 3),
    (10, 4, 2, 0),  # a copy restarted: its counters began again
    (None, 10, 2, None),  # the first summary has no window
    (4, 10, 0, None),
])
def test_rate(page: Any, previous: float | None, current: float, seconds: float, expected: float | None) -> None:
    assert call(page, "rates.js", "rate", previous, current, seconds) == expected


def test_a_point_is_the_window_between_two_summaries(page: Any) -> None:
    before = {"generations": 10, "generated_tokens": 100, "ttft": [[0.1, 1], ["+Inf", 2]], "itl": [],
              "copies": {"Ready": 1}}
    after = {"generations": 14, "generated_tokens": 180, "ttft": [[0.1, 3], ["+Inf", 4]], "itl": [],
             "engine_waiting": 2, "gateway_waiting": 1, "running": 3, "kv_usage": 0.25,
             "copies": {"Ready": 1, "Starting": 1}}
    point = call(page, "rates.js", "point", before, after, 2)
    assert point["requests"] == 2 and point["tokens"] == 40
    assert point["ttft50"] == pytest.approx(50)  # both new ones in (0, 0.1 s]: the median halfway, as Prometheus has it
    assert point["itl50"] is None
    assert (point["queue"], point["running"], point["kv"], point["ready"], point["copies"]) == (3, 3, 25, 1, 2)
    assert point["decode50"] is None and point["mixed99"] is None  # a summary without the engine's steps


def test_the_engine_steps_of_a_window(page: Any) -> None:
    """Decode and mixed steps' p50 and p99 over the window, from their cumulative buckets (gateway/metrics_summary)."""
    before = {"ttft": [], "itl": [], "step_decode": [[0.001, 4], [0.002, 4], ["+Inf", 4]], "step_mixed": []}
    after = {"ttft": [], "itl": [], "step_decode": [[0.001, 4], [0.002, 14], ["+Inf", 14]],
             "step_mixed": [[0.002, 0], [0.004, 4], ["+Inf", 4]]}
    point = call(page, "rates.js", "point", before, after, 2)
    assert point["decode50"] == pytest.approx(1.5) and point["decode99"] == pytest.approx(1.99)
    assert point["mixed50"] == pytest.approx(3.0) and point["mixed99"] == pytest.approx(3.98)


async_chunks = """async ([module, fn, chunks, wrap]) => {
    const m = await import(`/${module}`);
    async function* feed() { for (const c of chunks) yield new Uint8Array(c); }
    const out = [];
    const inner = wrap ? (await import('/eventstream.js')).payloads(feed()) : feed();
    try { for await (const item of m[fn](inner)) out.push(item); } catch (e) { out.push(`error: ${e.message}`); }
    return out;
}"""


def pieces(data: bytes, sizes: list[int]) -> list[list[int]]:
    """`data` cut at the given sizes (then the rest), as byte lists for the page."""
    out, at = [], 0
    for size in [*sizes, len(data)]:
        out.append(list(data[at:at + size]))
        at += size
    return [p for p in out if p]


SSE = b'data: {"a": 1}\n\ndata: {"a": "caf\xc3\xa9"}\r\n\r\n: comment\n\ndata: [DONE]\n\ndata: {"late": 1}\n\n'


@pytest.mark.parametrize("sizes", [[], [3], [1, 1, 1, 5, 20], [len(SSE) - 30]])
def test_server_sent_events_however_the_bytes_arrive(page: Any, sizes: list[int]) -> None:
    events = page.evaluate(async_chunks, ["sse.js", "eventsOf", pieces(SSE, sizes), False])
    assert events == [{"a": 1}, {"a": "café"}]  # split UTF-8 kept whole, comments skipped, nothing after [DONE]


def test_event_stream_payloads_carry_the_sse_of_a_tgi_stream(page: Any) -> None:
    tokens = [{"token": {"text": t, "special": False}} for t in ("Hello", " world")]
    sse = b"".join(b"data:" + json.dumps(t).encode() + b"\n\n" for t in tokens)
    frames = payload_part(sse[:10]) + payload_part(sse[10:])
    events = page.evaluate(async_chunks, ["sse.js", "eventsOf", pieces(frames, [7, 30, 2]), True])
    assert events == tokens


def test_an_exception_frame_is_thrown_with_its_message(page: Any) -> None:
    frames = payload_part(b'data:{"token": {"text": "a"}}\n\n') + model_stream_error("it broke", StreamErrorCode.BROKEN)
    events = page.evaluate(async_chunks, ["sse.js", "eventsOf", pieces(frames, [5]), True])
    assert events == [{"token": {"text": "a"}}, "error: ModelStreamError: it broke"]


FORM = {"model": "chat-ic", "target": {"endpoint": "ep", "component": "chat-ic"}, "system": "Be brief.",
        "messages": [{"role": "user", "content": "hi"}], "prompt": "Once", "maxTokens": "16", "temperature": "0.5",
        "topP": "1", "seed": "", "stream": True}


@pytest.mark.parametrize(("mode", "path", "headers", "body"), [
    ("chat", "/v1/chat/completions", {}, {
        "model": "chat-ic", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        "max_tokens": 16, "temperature": 0.5, "top_p": 1, "stream": True}),
    ("completion", "/v1/completions", {}, {
        "model": "chat-ic", "prompt": "Once", "max_tokens": 16, "temperature": 0.5, "top_p": 1, "stream": True}),
    ("tgi", "/endpoints/ep/invocations-response-stream", {"X-Amzn-SageMaker-Inference-Component": "chat-ic"}, {
        "inputs": "Once", "parameters": {"max_new_tokens": 16, "temperature": 0.5, "do_sample": True},
        "stream": True}),
])
def test_the_playground_request(page: Any, mode: str, path: str, headers: dict[str, str],
                                 body: dict[str, Any]) -> None:
    assert call(page, "requests.js", "buildRequest", {**FORM, "mode": mode}) == {
        "path": path, "headers": headers, "body": body}


def test_a_greedy_tgi_request_without_a_component(page: Any) -> None:
    form = {**FORM, "mode": "tgi", "temperature": "0", "stream": False, "seed": "7", "target": {"endpoint": "ep"}}
    assert call(page, "requests.js", "buildRequest", form) == {
        "path": "/endpoints/ep/invocations", "headers": {},
        "body": {"inputs": "Once", "parameters": {"max_new_tokens": 16, "seed": 7}}}


@pytest.mark.parametrize(("mode", "chunk", "text"), [
    ("chat", {"choices": [{"delta": {"content": "a"}}]}, "a"),
    ("chat", {"choices": [{"message": {"content": "whole"}}]}, "whole"),
    ("chat", {"choices": [{"delta": {}}]}, ""),
    ("completion", {"choices": [{"text": "b"}]}, "b"),
    ("tgi", {"token": {"text": "c", "special": False}}, "c"),
    ("tgi", {"token": {"text": "</s>", "special": True}}, ""),
    ("tgi", [{"generated_text": "all of it"}], "all of it"),
])
def test_the_text_of_an_answer(page: Any, mode: str, chunk: Any, text: str) -> None:
    assert call(page, "requests.js", "textOf", mode, chunk) == text


def test_snippets_quote_safely_and_never_hold_the_key(page: Any) -> None:
    form = {**FORM, "mode": "chat", "messages": [{"role": "user", "content": "it's"}]}
    request = call(page, "requests.js", "buildRequest", form)
    curl = call(page, "snippets.js", "curl", "http://127.0.0.1:8080", request)
    assert "it'\\''s" in curl and "$PIER_API_KEY" in curl and curl.startswith("curl -sN http://127.0.0.1:8080/v1/")
    openai = call(page, "snippets.js", "openaiSnippet", "http://127.0.0.1:8080", form, request)
    assert 'base_url="http://127.0.0.1:8080/v1"' in openai and "stream=True" in openai
    compile(openai, "openai snippet", "exec")  # it is Python
    boto = call(page, "snippets.js", "boto3Snippet", "http://127.0.0.1:8080", form, request)
    assert 'InferenceComponentName="chat-ic"' in boto and "invoke_endpoint_with_response_stream" in boto
    compile(boto, "boto3 snippet", "exec")


def test_bench_series_take_the_median_over_repeats(page: Any) -> None:
    runs = [{"target": "a", "level": 2, "output_throughput": 10}, {"target": "a", "level": 2, "output_throughput": 30},
            {"target": "a", "level": 1, "output_throughput": 5}, {"target": "b", "level": 1, "output_throughput": 7}]
    assert call(page, "bench.js", "seriesOf", runs, "output_throughput") == {
        "levels": [1, 2], "targets": ["a", "b"], "ys": [[5, 20], [7, None]]}


@pytest.mark.parametrize(("text", "says"), [
    ("{", "This is not JSON"),
    ("[]", 'has no "runs"'),
    ('{"runs": 3}', 'has no "runs"'),
])
def test_a_file_that_is_not_a_bench_summary(page: Any, text: str, says: str) -> None:
    error = page.evaluate("""async (text) => {
        const m = await import('/bench.js');
        try { m.readSummary(text); return null; } catch (e) { return e.message; }
    }""", text)
    assert error is not None and says in error


@pytest.mark.parametrize(("workload", "resource"), [
    ("chat-ic", "inference-component/chat-ic"),
    ("chat/AllTraffic", "endpoint/chat/variant/AllTraffic"),
])
def test_the_scaling_hook_names_a_workload_as_application_auto_scaling_does(page: Any, workload: str,
                                                                            resource: str) -> None:
    assert call(page, "scaling.js", "resourceId", workload) == resource


def test_an_endpoint_adds_its_workloads_up(page: Any) -> None:
    a = {"endpoint": "e", "generations": 2, "running": 1, "kv_usage": 0.2, "copies": {"Ready": 1},
         "ttft": [[0.1, 1], [0.5, 2], ["+Inf", 2]], "itl": []}
    b = {"endpoint": "e", "generations": 3, "running": 2, "kv_usage": 0.6, "copies": {"Ready": 1, "Starting": 1},
         "ttft": [["+Inf", 4], [0.5, 3], [0.1, 0]], "itl": []}
    c = {"endpoint": None, "generations": 9, "copies": {}, "ttft": [], "itl": []}
    shown = call(page, "rates.js", "views", {"time": 1, "workloads": {"a": a, "b": b, "c": c}})
    assert sorted(shown) == ["a", "b", "c", "endpoint:e"]
    combined = shown["endpoint:e"]
    assert (combined["generations"], combined["running"], combined["kv_usage"]) == (5, 3, 0.6)
    assert combined["copies"] == {"Ready": 2, "Starting": 1}
    assert combined["ttft"] == [[0.1, 1], [0.5, 5], ["+Inf", 6]]  # by bound, in order, +Inf last
    assert combined["step_decode"] == []  # the engine's steps too, when the copies report them


@pytest.mark.parametrize(("copy", "shown"), [
    ({"device": "gpu", "gpus": ["0", "1"], "accelerators": 2, "cpu_fallback": False}, "GPU 0, 1"),
    ({"device": "cpu", "gpus": [], "accelerators": 1, "cpu_fallback": True}, "CPU (asked for 1 GPU, --cpu-fallback)"),
    ({"device": "cpu", "gpus": [], "accelerators": 0, "cpu_fallback": False}, "CPU"),
    ({"device": None, "gpus": [], "accelerators": 0, "cpu_fallback": False}, "–"),  # a copy no longer wanted
])
def test_the_device_a_copy_runs_on(page: Any, copy: dict[str, Any], shown: str) -> None:
    assert call(page, "devices.js", "device", copy) == shown


@pytest.mark.parametrize(("gpus", "shown"), [
    ({"count": 0, "source": "none", "gpus": [], "cpu_fallback": False}, "This host has no GPUs for copies."),
    ({"count": 0, "source": "none", "gpus": [], "cpu_fallback": True},
     "This host has no GPUs for copies. Copies asking for GPUs it lacks run on CPU (--cpu-fallback)."),
    ({"count": 2, "source": "nvml", "cpu_fallback": False, "gpus": [
        {"id": 0, "name": "NVIDIA H100", "copy_id": "ic-0-ab"}, {"id": 1, "name": "NVIDIA H100", "copy_id": None}]},
     "This host's GPUs: 0: NVIDIA H100, 1: NVIDIA H100 (nvml); 1 held by copies."),
    ({"count": None, "message": "Copies run on a Ray cluster."}, "Copies run on a Ray cluster."),
])
def test_the_hosts_gpus(page: Any, gpus: dict[str, Any], shown: str) -> None:
    assert call(page, "devices.js", "hostGpus", gpus) == shown


# ---- an endpoint's update and its variants (update.js, variants.js)


def pending(status: str, current: float, message: str = "baking at 50% of traffic on the new fleet") -> dict[str, Any]:
    return {"EndpointConfigName": "new", "ProductionVariants": [{
        "VariantName": "Green", "CurrentWeight": current, "DesiredWeight": 1.0,
        "VariantStatus": [{"Status": status, "StatusMessage": message}]}]}


def routed(kind: str) -> dict[str, Any]:
    return {"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {"Type": kind}}}


@pytest.mark.parametrize(("described", "expected"), [
    ({"EndpointStatus": "InService"}, None),  # no update
    ({"EndpointStatus": "Failed", "FailureReason": "no room"}, None),  # a failed create is no update
    ({"EndpointStatus": "InService", "FailureReason": "alarm a went into ALARM"},
     {"phase": "rolled back", "config": None, "moved": 0, "detail": "", "reason": "alarm a went into ALARM"}),
    ({"EndpointStatus": "UpdateRollbackFailed", "FailureReason": "x"},
     {"phase": "rollback failed", "config": None, "moved": 0, "detail": "", "reason": "x"}),
    ({"EndpointStatus": "Updating", "PendingDeploymentSummary": pending("Creating", 0.0, "provisioning the new fleet"),
      "LastDeploymentConfig": routed("CANARY")},
     {"phase": "provisioning", "config": "new", "moved": 0, "detail": "provisioning the new fleet", "reason": ""}),
    ({"EndpointStatus": "Updating", "PendingDeploymentSummary": pending("Baking", 0.5),
      "LastDeploymentConfig": routed("CANARY")},
     {"phase": "canary", "config": "new", "moved": 0.5, "detail": "baking at 50% of traffic on the new fleet",
      "reason": ""}),
    ({"EndpointStatus": "Updating", "PendingDeploymentSummary": pending("Baking", 0.25, "baking at 25%"),
      "LastDeploymentConfig": routed("LINEAR")},
     {"phase": "linear", "config": "new", "moved": 0.25, "detail": "baking at 25%", "reason": ""}),
    ({"EndpointStatus": "Updating", "PendingDeploymentSummary": pending("Baking", 1.0, "baking at 100%")},
     {"phase": "shifted", "config": "new", "moved": 1, "detail": "baking at 100%", "reason": ""}),
])
def test_update_progress(page: Any, described: dict[str, Any], expected: dict[str, Any] | None) -> None:
    assert call(page, "update.js", "updateProgress", described) == expected


@pytest.mark.parametrize(("policy", "expected"), [
    ({}, {"EndpointName": "e", "EndpointConfigName": "c"}),  # SageMaker's default: all at once once healthy
    ({"type": "CANARY", "percent": "20", "waitS": "30", "alarms": "a, b"}, {
        "EndpointName": "e", "EndpointConfigName": "c", "DeploymentConfig": {
            "BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {
                "Type": "CANARY", "WaitIntervalInSeconds": 30,
                "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 20}}},
            "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": "a"}, {"AlarmName": "b"}]}}}),
    ({"type": "LINEAR", "percent": "25", "waitS": "10"}, {
        "EndpointName": "e", "EndpointConfigName": "c", "DeploymentConfig": {
            "BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {
                "Type": "LINEAR", "WaitIntervalInSeconds": 10,
                "LinearStepSize": {"Type": "CAPACITY_PERCENT", "Value": 25}}}}}),
    ({"type": "ALL_AT_ONCE", "waitS": "5", "alarms": "a"}, {
        "EndpointName": "e", "EndpointConfigName": "c", "DeploymentConfig": {
            "BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE",
                                                                      "WaitIntervalInSeconds": 5}},
            "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": "a"}]}}}),
])
def test_update_request(page: Any, policy: dict[str, Any], expected: dict[str, Any]) -> None:
    assert call(page, "update.js", "updateRequest", "e", "c", policy) == expected


def test_each_variant_has_its_own_metrics_from_get_metric_data(page: Any) -> None:
    described = {"ProductionVariants": [{"VariantName": "Main"}], "ShadowProductionVariants": [{"VariantName": "Sh"}]}
    variants = call(page, "variants.js", "variantsOf", described)
    assert variants == [{"name": "Main", "role": "production"}, {"name": "Sh", "role": "shadow"}]
    queries = call(page, "variants.js", "variantQueries", "e", variants, 300)
    assert len(queries) == 10 and queries[5]["Id"] == "v1_inv"
    assert queries[5]["MetricStat"] == {"Metric": {"Namespace": "AWS/SageMaker", "MetricName": "Invocations",
                                                   "Dimensions": [{"Name": "EndpointName", "Value": "e"},
                                                                  {"Name": "VariantName", "Value": "Sh"}]},
                                        "Period": 300, "Stat": "Sum"}
    results = [{"Id": "v0_inv", "Values": [3, 1]}, {"Id": "v0_e5", "Values": [0]}, {"Id": "v0_lat", "Values": [8000]},
               {"Id": "v0_n", "Values": [4]}, {"Id": "v1_inv", "Values": [2]}, {"Id": "v1_e5", "Values": [2]}]
    assert call(page, "variants.js", "variantMetrics", variants, results) == [
        {"name": "Main", "role": "production", "invocations": 4, "errors4xx": 0, "errors5xx": 0, "latencyMs": 2},
        {"name": "Sh", "role": "shadow", "invocations": 2, "errors4xx": 0, "errors5xx": 2, "latencyMs": None}]
