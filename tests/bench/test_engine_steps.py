"""Engine step figures from two scrapes of Prometheus text: bucket counts summed over copies, quantiles from
cumulative buckets, per kind."""

from __future__ import annotations

import math

import pytest

from pier.bench.engine_steps import EngineSteps, histograms, quantile


@pytest.mark.parametrize(("buckets", "q", "expected"), [
    ({0.001: 0, 0.002: 10, math.inf: 10}, 0.5, 0.0015),  # all in one bucket: linear inside it
    ({0.001: 5, 0.002: 10, math.inf: 10}, 0.5, 0.001),  # the rank ends a bucket exactly
    ({0.001: 5, 0.002: 10, math.inf: 10}, 0.99, 0.00198),
    ({0.001: 0, 0.002: 0, math.inf: 4}, 0.5, 0.002),  # above every bound: the highest finite one
    ({0.001: 0, math.inf: 0}, 0.5, None),  # nothing observed
    ({}, 0.5, None),
])
def test_quantile_from_cumulative_buckets(buckets: dict[float, float], q: float, expected: float | None) -> None:
    got = quantile(buckets, q)
    assert got == expected if expected is None else got == pytest.approx(expected)


def test_figures_are_the_difference_of_two_scrapes() -> None:
    before = {("pier_engine_step_seconds", "decode"): {0.001: 4.0, 0.002: 4.0, math.inf: 4.0}}
    after = {("pier_engine_step_seconds", "decode"): {0.001: 4.0, 0.002: 14.0, math.inf: 14.0},
             ("pier_engine_step_seconds", "mixed"): {0.001: 0.0, 0.002: 0.0, math.inf: 2.0}}
    figures = EngineSteps.between(before, after)
    assert figures.step["decode"].steps == 10  # the 4 steps before the run are not the run's
    assert figures.step["decode"].p50_s == pytest.approx(0.0015)
    assert figures.step["mixed"].steps == 2 and figures.step["prompt"].steps == 0
    assert figures.steps == 12
    assert figures.cell("decode") == "1.5 / 2.0 (10)" and figures.cell("prompt") == "–"
    assert figures.mixed_over_decode() == pytest.approx(0.002 / 0.0015)


def test_no_mixed_steps_no_ratio() -> None:
    after = {("pier_engine_step_seconds", "decode"): {0.001: 3.0, math.inf: 3.0}}
    assert EngineSteps.between({}, after).mixed_over_decode() is None


def series(copy: str, component: str, kind: str, counts: tuple[int, int, int]) -> str:
    labels = f'component="{component}",copy="{copy}",kind="{kind}"'
    return "\n".join(f'pier_engine_step_seconds_bucket{{{labels},le="{le}"}} {n}'
                     for le, n in zip(("0.001", "0.002", "+Inf"), counts, strict=True))


GATEWAY_TEXT = "\n".join([
    "# HELP pier_engine_step_seconds Engine steps.",
    "# TYPE pier_engine_step_seconds histogram",
    series("c1", "chat/AllTraffic", "decode", (1, 5, 5)),
    series("c2", "chat/AllTraffic", "decode", (2, 3, 4)),
    series("c3", "other/AllTraffic", "decode", (0, 0, 9)),
    "# HELP pier_requests_total Requests.",
    "# TYPE pier_requests_total counter",
    'pier_requests_total{copy="c1",component="chat/AllTraffic"} 7',
]) + "\n"


@pytest.mark.parametrize(("components", "expected"), [
    (None, {0.001: 3.0, 0.002: 8.0, math.inf: 18.0}),  # every copy's series, summed
    ({"chat/AllTraffic"}, {0.001: 3.0, 0.002: 8.0, math.inf: 9.0}),  # the endpoint's two copies only
    ({"nobody"}, None),
])
def test_histograms_sum_the_copies_of_the_components_asked_for(components: set[str] | None,
                                                               expected: dict[float, float] | None) -> None:
    found = histograms(GATEWAY_TEXT, components)
    assert found.get(("pier_engine_step_seconds", "decode")) == expected
    assert all(metric == "pier_engine_step_seconds" for metric, _ in found)


@pytest.mark.parametrize("text", ["", "not prometheus {{{", "# TYPE x counter\nx 1\n"])
def test_text_without_step_histograms_gives_none(text: str) -> None:
    assert histograms(text) == {}
