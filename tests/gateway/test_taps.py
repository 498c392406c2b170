"""Which requests are captured and which go to the shadow variant too (gateway/taps.py), from the stored
endpoint, with the random draws given."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pier.control.data_capture import DataCaptureSpec
from pier.control.records import EndpointRecord, VariantRecord
from pier.gateway.taps import captured_of, plan_of, shadow_share
from pier.runtime.tap import Exchanged, TapPlan


def endpoint(percent: int | None = None, enabled: bool = True, shadow_weight: float = 1.0) -> EndpointRecord:
    capture = None if percent is None else DataCaptureSpec(
        EnableCapture=enabled, InitialSamplingPercentage=percent, DestinationS3Uri="s3://b/p",
        CaptureOptions=[{"CaptureMode": "InputAndOutput"}])
    variants = (VariantRecord(name="AllTraffic", instance_type="local", instance_count=1, weight=2.0, model="m"),
                VariantRecord(name="Shadow", instance_type="local", instance_count=1, weight=shadow_weight,
                              model="m", shadow=True))
    return EndpointRecord(name="e", arn="a", created=0, modified=0, config_name="c", variants=variants,
                          data_capture=capture)


def draws(*values: float) -> Iterator[float]:
    return iter(values)


@pytest.mark.parametrize(("record", "variant", "drawn", "plan"), [
    (endpoint(), "AllTraffic", (0.0,), TapPlan(False, ("Shadow",))),  # no capture config: only the shadow
    (endpoint(30), "AllTraffic", (0.29, 0.0), TapPlan(True, ("Shadow",))),  # 29 < 30 percent: captured
    (endpoint(30), "AllTraffic", (0.30, 0.0), TapPlan(False, ("Shadow",))),
    (endpoint(100, enabled=False), "AllTraffic", (0.0,), TapPlan(False, ("Shadow",))),  # EnableCapture false
    (endpoint(0), "AllTraffic", (0.0, 0.0), TapPlan(False, ("Shadow",))),
    (endpoint(shadow_weight=1.0), "AllTraffic", (0.49,), TapPlan(False, ("Shadow",))),  # weight 1 of 2: half
    (endpoint(shadow_weight=1.0), "AllTraffic", (0.5,), TapPlan(False, ())),
    (endpoint(100), "Shadow", (0.0,), TapPlan(True, ())),  # the shadow's own requests: captured, never shadowed
])
def test_plan(record: EndpointRecord, variant: str, drawn: tuple[float, ...], plan: TapPlan) -> None:
    values = draws(*drawn)
    assert plan_of(record, variant, lambda: next(values)) == plan


@pytest.mark.parametrize(("production", "shadow", "share"), [
    (1.0, 1.0, 1.0), (2.0, 1.0, 0.5), (1.0, 3.0, 1.0), (1.0, 0.0, 0.0), (0.0, 1.0, 1.0), (0.0, 0.0, 0.0),
])
def test_shadow_share(production: float, shadow: float, share: float) -> None:
    assert shadow_share(production, shadow) == share


@pytest.mark.parametrize(("modes", "sides"), [
    ({"Input"}, (True, False)), ({"Output"}, (False, True)), ({"Input", "Output"}, (True, True)),
])
def test_capture_modes_pick_the_sides(modes: set[str], sides: tuple[bool, bool]) -> None:
    exchange = Exchanged("E", "AllTraffic", b"in", "application/json", b"out", "text/plain", "rid", None, 1.0)
    captured = captured_of("e", exchange, frozenset(modes))
    assert (captured.input is not None, captured.output is not None) == sides
    assert (captured.endpoint, captured.event_id) == ("e", "rid")
