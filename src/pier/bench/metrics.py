"""The benchmark's numbers, as vLLM's benchmark_serving and llmperf define them. Pure: records in, numbers out.

vLLM (per successful request): TTFT = first token-bearing chunk; E2EL = last token-bearing chunk;
TPOT = (E2EL - TTFT) / (output tokens - 1) for requests with more than one output token; ITL = every gap
between consecutive token-bearing chunks of every request, pooled; throughputs = totals / run duration;
goodput = requests meeting every SLO (TTFT, TPOT, E2EL; a one-token request's TPOT counts as 0) / duration.
Percentiles interpolate linearly (numpy's and pandas' default).

llmperf (per successful request): inter_token_latency_s = the sum of the gaps from the request's start through
its last token (TTFT included) / output tokens; end_to_end_latency_s = until the response is complete;
request_output_throughput_token_per_s = output tokens / end_to_end_latency_s. Its stddev is the sample
standard deviation (pandas); vLLM's std is the population one (numpy). Both are kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pier.bench.request_record import RequestRecord

PERCENTILES = (25, 50, 75, 90, 95, 99)  # llmperf's quantiles, which include vLLM's default p99
MS = 1000.0
SECONDS_PER_HOUR = 3600
TOKENS_PER_MILLION = 1_000_000


@dataclass(frozen=True)
class Distribution:
    """Summary statistics of one metric's samples; all zeros (count 0) when there are none, as vLLM reports."""

    count: int = 0
    mean: float = 0.0
    std: float = 0.0
    sample_std: float = 0.0
    min: float = 0.0
    max: float = 0.0
    percentiles: dict[int, float] = field(default_factory=lambda: dict.fromkeys(PERCENTILES, 0.0))

    @classmethod
    def of(cls, samples: Sequence[float]) -> Distribution:
        if not samples:
            return cls()
        values = np.asarray(samples, dtype=float)
        return cls(
            count=len(values),
            mean=float(values.mean()),
            std=float(values.std()),
            sample_std=float(values.std(ddof=1)) if len(values) > 1 else 0.0,
            min=float(values.min()),
            max=float(values.max()),
            percentiles={p: float(np.percentile(values, p)) for p in PERCENTILES},
        )

    @property
    def median(self) -> float:
        return self.percentiles[50]


@dataclass(frozen=True)
class Slo:
    """Service-level objectives for goodput, in seconds; None means unconstrained."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2el_s: float | None = None

    @classmethod
    def from_ms(cls, ttft_ms: float | None, tpot_ms: float | None, e2el_ms: float | None) -> Slo:
        """From milliseconds, the unit of vLLM's --goodput and of pier bench's --slo-* options."""
        return cls(*(None if limit is None else limit / MS for limit in (ttft_ms, tpot_ms, e2el_ms)))

    @property
    def active(self) -> bool:
        return any(limit is not None for limit in (self.ttft_s, self.tpot_s, self.e2el_s))


@dataclass(frozen=True)
class Metrics:
    started: int
    completed: int
    errors_by_code: dict[str, int]
    duration_s: float
    total_input_tokens: int
    total_output_tokens: int
    good_requests: int | None  # None when no SLO was set: goodput is then undefined, as in vLLM
    ttft: Distribution
    tpot: Distribution
    itl: Distribution
    e2el: Distribution
    llmperf_inter_token_latency: Distribution
    llmperf_end_to_end_latency: Distribution
    request_output_throughput: Distribution
    input_tokens: Distribution
    output_tokens: Distribution

    @property
    def failed(self) -> int:
        return self.started - self.completed

    @property
    def success_rate(self) -> float:
        return self.completed / self.started if self.started else 0.0

    @property
    def error_rate(self) -> float:
        return self.failed / self.started if self.started else 0.0

    @property
    def request_throughput(self) -> float:
        return _per_second(self.completed, self.duration_s)

    @property
    def output_throughput(self) -> float:
        return _per_second(self.total_output_tokens, self.duration_s)

    @property
    def total_token_throughput(self) -> float:
        return _per_second(self.total_input_tokens + self.total_output_tokens, self.duration_s)

    @property
    def request_goodput(self) -> float | None:
        return None if self.good_requests is None else _per_second(self.good_requests, self.duration_s)


def tpot(record: RequestRecord) -> float | None:
    """Time per output token after the first; None for a request with at most one output token."""
    if record.ttft is None or record.latency is None or record.output_tokens <= 1:
        return None
    return (record.latency - record.ttft) / (record.output_tokens - 1)


def is_good(record: RequestRecord, slo: Slo) -> bool:
    """vLLM's goodput test: a successful request within every objective that is set."""
    if not record.ok or record.ttft is None or record.latency is None:
        return False
    checks = ((slo.ttft_s, record.ttft), (slo.tpot_s, tpot(record) or 0.0), (slo.e2el_s, record.latency))
    return all(limit is None or value <= limit for limit, value in checks)


def summarize(records: Sequence[RequestRecord], duration_s: float, slo: Slo | None = None) -> Metrics:
    slo = slo or Slo()
    done = [r for r in records if r.ok]
    return Metrics(
        started=len(records),
        completed=len(done),
        errors_by_code=dict(Counter(r.error_code for r in records if r.error_code is not None)),
        duration_s=duration_s,
        total_input_tokens=sum(r.input_tokens for r in done),
        total_output_tokens=sum(r.output_tokens for r in done),
        good_requests=sum(is_good(r, slo) for r in done) if slo.active else None,
        ttft=Distribution.of([r.ttft for r in done if r.ttft is not None]),
        tpot=Distribution.of([t for r in done if (t := tpot(r)) is not None]),
        itl=Distribution.of([gap for r in done for gap in r.itl]),
        e2el=Distribution.of([r.latency for r in done if r.latency is not None]),
        llmperf_inter_token_latency=Distribution.of([_llmperf_itl(r) for r in done]),
        llmperf_end_to_end_latency=Distribution.of([r.end for r in done if r.end is not None]),
        request_output_throughput=Distribution.of([_request_throughput(r) for r in done]),
        input_tokens=Distribution.of([r.input_tokens for r in done]),
        output_tokens=Distribution.of([r.output_tokens for r in done]),
    )


def cost_per_million_tokens(usd_per_hour: float, tokens_per_s: float) -> float | None:
    """What a million tokens cost at this throughput on capacity billed by the hour; None at zero throughput."""
    if tokens_per_s <= 0:
        return None
    return usd_per_hour / SECONDS_PER_HOUR / tokens_per_s * TOKENS_PER_MILLION


def _llmperf_itl(record: RequestRecord) -> float:
    if not record.output_tokens or record.latency is None:
        return 0.0
    return record.latency / record.output_tokens


def _request_throughput(record: RequestRecord) -> float:
    if not record.end:
        return 0.0
    return record.output_tokens / record.end


def _per_second(count: float, duration_s: float) -> float:
    return count / duration_s if duration_s > 0 else 0.0
