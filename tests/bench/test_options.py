from __future__ import annotations

import pytest
from pydantic import ValidationError

from pier.bench.options import DEFAULT_REQUESTS, BenchError, BenchOptions, Level, parse_numbers, parse_schedule
from pier.bench.pricing import INSTANCE_PRICES, resolve_price


def options(**fields: object) -> BenchOptions:
    return BenchOptions(target="http://h", **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "levels"),
    [
        ({}, [Level("concurrency", 1)]),
        ({"concurrency": (1, 2, 4)}, [Level("concurrency", 1), Level("concurrency", 2), Level("concurrency", 4)]),
        ({"rates": (0.5,)}, [Level("rate", 0.5)]),
        ({"concurrency": (8,), "rates": (2.0,)}, [Level("concurrency", 8), Level("rate", 2.0)]),
        ({"rate_schedule": ((1.0, 60.0), (8.0, 120.0))}, [Level("schedule", 180, ((1.0, 60.0), (8.0, 120.0)))]),
    ],
)
def test_levels(fields: dict[str, object], levels: list[Level]) -> None:
    assert options(**fields).levels == levels


def test_bounds_and_repeats() -> None:
    assert options().request_limit == DEFAULT_REQUESTS
    assert options(duration_s=5).request_limit is None
    assert options(requests=3, duration_s=5).request_limit == 3
    assert options().repeat_count == 1
    assert options(compare="http://b").repeat_count == 2
    assert options(compare="http://b", repeats=3).repeat_count == 3


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"workload": "shared-prefix"}, "--shared-prefix N"),
        ({"concurrency": (0,)}, "1 or more"),
        ({"rates": (-1.0,)}, "positive"),
        ({"payload": "sagemaker"}, "openai-completions, openai-chat or tgi"),
        ({"prompt_format": "ids", "workload": "multi-turn"}, "--prompt-format text"),
        ({"inference_component": " "}, "--inference-component names a component"),
    ],
)
def test_refused_with_a_fix(fields: dict[str, object], message: str) -> None:
    with pytest.raises(BenchError, match=message):
        options(**fields)


def test_field_ranges() -> None:
    with pytest.raises(ValidationError):
        options(input_len=0)


@pytest.mark.parametrize(
    ("price", "instance", "count", "usd"),
    [
        (None, None, 1, None),
        (2.5, None, 2, 5.0),
        (2.5, "ml.g5.2xlarge", 1, 2.5),  # a given price wins over the table
        (None, "ml.g5.2xlarge", 1, INSTANCE_PRICES["ml.g5.2xlarge"][0]),
        (None, "p4d.24xlarge", 2, 2 * INSTANCE_PRICES["ml.p4d.24xlarge"][0]),
    ],
)
def test_price(price: float | None, instance: str | None, count: int, usd: float | None) -> None:
    resolved = resolve_price(price, instance, count)
    assert (resolved and resolved.usd_per_hour) == (usd and pytest.approx(usd))
    if resolved is not None:
        assert resolved.source


def test_table_prices_say_when_and_where() -> None:
    source = resolve_price(None, "ml.c7g.8xlarge", 1).source  # type: ignore[union-attr]
    assert "as of" in source and "us-east-1" in source


def test_unknown_instance_type_says_how_to_fix() -> None:
    with pytest.raises(BenchError, match="--price-per-hour"):
        resolve_price(None, "ml.m9.huge", 1)


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [("1,2,4", int, (1, 2, 4)), ("8", int, (8,)), ("0.5, 1,2", float, (0.5, 1.0, 2.0)), ("4,", int, (4,))],
)
def test_parse_numbers(text: str, kind: type, expected: tuple[float, ...]) -> None:
    assert parse_numbers(text, kind, "--x") == expected


def test_parse_numbers_says_how_to_fix() -> None:
    with pytest.raises(BenchError, match="comma-separated numbers such as 1,2,4"):
        parse_numbers("1;2", int, "--concurrency")


def test_parse_schedule() -> None:
    assert parse_schedule("1:60,8:120, 1:120") == ((1.0, 60.0), (8.0, 120.0), (1.0, 120.0))
    assert options(rate_schedule=parse_schedule("0.5:10")).levels[0].label == "schedule 0.5:10"
    with pytest.raises(BenchError, match="RATE:SECONDS"):
        parse_schedule("8")
    with pytest.raises(BenchError, match="seconds above 0"):
        options(rate_schedule=((1.0, 0.0),))
    assert options(rate_schedule=((0.0, 10.0),)).levels[0].value == 10  # a pause
