"""Prometheus metrics of one model server, in a registry of its own (tests build many apps per process).

Latencies are measured where the client feels them (the HTTP layer); counts of tokens, cache hits and
KV use come from the engine's own totals when /metrics is scraped, so nothing is counted twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pier.engine.request import GenerationChunk
from pier.engine.stats import EngineStats
from pier.engine.step_times import STEP_BUCKETS, StepKind, TimeHistogram

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
TOKEN_GAP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5)


class ServerMetrics:
    def __init__(self, engine_stats: Callable[[], EngineStats | None], in_flight: Callable[[], int]) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "pier_http_requests", "HTTP requests by route and status.", ["route", "status"], registry=r)
        self.request_seconds = Histogram(
            "pier_http_request_duration_seconds", "HTTP request duration by route.", ["route"],
            buckets=LATENCY_BUCKETS, registry=r)
        self.ttft = Histogram(
            "pier_time_to_first_token_seconds", "From request to its first generated token.",
            buckets=LATENCY_BUCKETS, registry=r)
        self.itl = Histogram(
            "pier_inter_token_latency_seconds", "Gap between consecutive tokens of a request.",
            buckets=TOKEN_GAP_BUCKETS, registry=r)
        self.e2e = Histogram(
            "pier_e2e_request_latency_seconds", "From request to its last token.",
            buckets=LATENCY_BUCKETS, registry=r)
        self.queue = Histogram(
            "pier_request_queue_time_seconds", "From submission until the engine first scheduled the request.",
            buckets=LATENCY_BUCKETS, registry=r)
        self.outcomes = Counter(
            "pier_generations", "Finished generations by how they ended.", ["outcome"], registry=r)
        r.register(_EngineCollector(engine_stats, in_flight))

    def trace(self) -> GenerationTrace:
        return GenerationTrace(self)

    def exposition(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class GenerationTrace:
    """Times one generation as its chunks arrive."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self._metrics = metrics
        self._start = time.perf_counter()
        self._last_token: float | None = None
        self._ended = False

    def chunk(self, chunk: GenerationChunk) -> None:
        now = time.perf_counter()
        if chunk.token_ids:
            if self._last_token is None:
                self._metrics.ttft.observe(now - self._start)
            else:
                self._metrics.itl.observe(now - self._last_token)
            self._last_token = now
        if chunk.finish_reason is not None:
            if chunk.timings is not None:
                self._metrics.queue.observe(chunk.timings.queue_ms / 1000)
            self._metrics.e2e.observe(now - self._start)
            self.end(chunk.finish_reason.value)

    def end(self, outcome: str) -> None:
        """Count the outcome once: the finish reason, or why it was cut (timeout, disconnect, error)."""
        if not self._ended:
            self._ended = True
            self._metrics.outcomes.labels(outcome).inc()


class _EngineCollector(Collector):
    def __init__(self, engine_stats: Callable[[], EngineStats | None], in_flight: Callable[[], int]) -> None:
        self._stats = engine_stats
        self._in_flight = in_flight

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "pier_requests_in_flight", "Admitted HTTP generation requests not yet answered.",
            value=self._in_flight())
        stats = self._stats()
        if stats is None:
            return
        kv_ratio = stats.kv_cells_used / stats.kv_cells_total if stats.kv_cells_total else 0.0
        gauges = {
            "pier_requests_running": ("Sequences decoding in the engine.", stats.running),
            "pier_requests_waiting": ("Requests queued in the engine.", stats.waiting),
            "pier_kv_cells_used": ("KV cache cells in use (including cached prefixes).", stats.kv_cells_used),
            "pier_kv_cells_total": ("KV cache cells (the context size).", stats.kv_cells_total),
            "pier_kv_usage_ratio": ("Fraction of KV cells in use.", kv_ratio),
            "pier_prefix_cache_entries": ("Finished sequences kept as reusable prefixes.",
                                          stats.cached_prefixes),
            "pier_prefix_cache_budget_cells": ("KV cells finished prompts may keep as prefixes (grows when "
                                               "evicted ones are asked for again).", stats.prefix_budget_cells),
            "pier_prefix_cache_hit_ratio": ("Prompt tokens served from the prefix cache / all prompt tokens.",
                                            stats.prefix_hit_rate),
            "pier_prefix_cache_device_hit_ratio": ("Prompt tokens shared from the KV cache / all prompt tokens.",
                                                   stats.device_hit_rate),
            "pier_prefix_cache_host_hit_ratio": ("Prompt tokens restored from host memory / all prompt tokens.",
                                                 stats.host_hit_rate),
            "pier_host_cache_entries": ("Prefixes saved in host memory after leaving the KV cache.",
                                        stats.host_cache_entries),
            "pier_host_cache_bytes": ("Host memory held by saved prefixes (PIER_HOST_CACHE_MB caps it).",
                                      stats.host_cache_bytes),
        }
        for name, (doc, value) in gauges.items():
            yield GaugeMetricFamily(name, doc, value=value)
        counters = {
            "pier_prompt_tokens": ("Prompt tokens admitted.", stats.prompt_tokens),
            "pier_prefix_cache_hit_tokens": ("Prompt tokens taken from the prefix cache.",
                                             stats.cached_prompt_tokens),
            "pier_prefix_cache_restored_tokens": ("Prompt tokens restored from host memory (part of the hits).",
                                                  stats.restored_prompt_tokens),
            "pier_generated_tokens": ("Tokens generated.", stats.generated_tokens),
            "pier_preemptions": ("Sequences evicted for KV room and recomputed later.", stats.preemptions),
            "pier_engine_steps": ("Forward passes.", stats.steps),
            "pier_draft_tokens": ("Tokens drafted by n-gram speculation (SPECULATE).", stats.drafted_tokens),
            "pier_draft_kept_tokens": ("Drafted tokens the model wrote as drafted: steps saved.",
                                       stats.draft_kept_tokens),
        }
        for name, (doc, value) in counters.items():
            yield CounterMetricFamily(name, doc, value=value)
        times = stats.step_times  # one copy for both families
        yield _step_histogram(
            "pier_engine_forward_seconds", "The forward pass of one engine step (llama_decode), by what the step "
            "carried: decode (running streams only), mixed (streams and prompt tokens), prompt (prompt tokens only).",
            times.forward)
        yield _step_histogram(
            "pier_engine_step_seconds", "One engine step on the engine thread (scheduling, the forward pass, "
            "sampling, prefix copies to and from host memory), by what it carried: a stream's gap between tokens.",
            times.step)


def _step_histogram(name: str, doc: str, by_kind: dict[StepKind, TimeHistogram]) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=["kind"])
    for kind in StepKind:
        histogram = by_kind[kind]
        cumulative, buckets = 0, []
        for bound, count in zip([*map(str, STEP_BUCKETS), "+Inf"], histogram.counts, strict=True):
            cumulative += count
            buckets.append((bound, cumulative))
        family.add_metric([kind.value], buckets, sum_value=histogram.total_s)
    return family


class RequestMetrics:
    """ASGI middleware counting every HTTP request by its route template and final status."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_with_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_with_status)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.requests.labels(route, str(status)).inc()
            self.metrics.request_seconds.labels(route).observe(time.perf_counter() - start)
