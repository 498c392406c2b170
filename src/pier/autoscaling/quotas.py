"""CloudWatch's PutMetricData quotas, as AWS states them (the API reference and botocore's model; botocore itself
checks none of the maxima): at most 1000 metrics a call (MetricData and EntityMetricData together, at most 2 of
the latter), 150 values a datum with one count each, 30 dimensions, names of 255 characters and dimension values
of 1024, values within ±2^360 and finite, a datum's Value, Values and StatisticValues one at a time, timestamps
from two weeks ago to two hours ahead. The request's size (1 MB) is the gateway's body limit (gateway/body.py).

`check_put_metric_data()` is pure: it refuses the first thing over a quota with the error and wording AWS uses
(`The collection MetricData.member.1.Values must not have a size greater than 150.`), so boto3 raises the same
`InvalidParameterValue`, and says how to fit."""

from __future__ import annotations

import math
from typing import Any

from pier.autoscaling.errors import InvalidParameterCombination, InvalidParameterValue, MissingParameter
from pier.autoscaling.wire import epoch

Body = dict[str, Any]

MAX_METRICS = 1000
MAX_ENTITIES = 2
MAX_VALUES = 150
MAX_DIMENSIONS = 30
MAX_NAME = 255
MAX_DIMENSION_VALUE = 1024
MAX_MAGNITUDE = 2.0 ** 360
PAST_S = 14 * 86_400
FUTURE_S = 2 * 3_600


def check_put_metric_data(body: Body, now: float) -> list[Body]:
    """The call's datums (MetricData, then each EntityMetricData's), once every one is within AWS's quotas."""
    _check_length("Namespace", body.get("Namespace", ""), MAX_NAME)
    entities = body.get("EntityMetricData") or []
    if len(entities) > MAX_ENTITIES:
        raise InvalidParameterValue(f"The collection EntityMetricData must not have a size greater than "
                                    f"{MAX_ENTITIES}; send the other entities' data in another call.")
    named = [(f"MetricData.member.{i}", d) for i, d in enumerate(body.get("MetricData") or [], 1)]
    for e, entity in enumerate(entities, 1):
        named += [(f"EntityMetricData.member.{e}.MetricData.member.{i}", d)
                  for i, d in enumerate(entity.get("MetricData") or [], 1)]
    if len(named) > MAX_METRICS:
        raise InvalidParameterValue(f"The collection MetricData must not have a size greater than {MAX_METRICS} "
                                    f"(this call has {len(named)} metrics, MetricData and EntityMetricData "
                                    "together); split them over several PutMetricData calls.")
    for where, datum in named:
        _check_datum(where, datum, now)
    return [datum for _, datum in named]


def _check_datum(where: str, datum: Body, now: float) -> None:
    _check_length(f"{where}.MetricName", datum.get("MetricName", ""), MAX_NAME)
    dims = datum.get("Dimensions") or []
    if len(dims) > MAX_DIMENSIONS:
        raise InvalidParameterValue(f"The collection {where}.Dimensions must not have a size greater than "
                                    f"{MAX_DIMENSIONS}.")
    for d, dim in enumerate(dims, 1):
        _check_length(f"{where}.Dimensions.member.{d}.Name", dim.get("Name", ""), MAX_NAME)
        _check_length(f"{where}.Dimensions.member.{d}.Value", dim.get("Value", ""), MAX_DIMENSION_VALUE)
    given = [key for key in ("Value", "Values", "StatisticValues") if key in datum]
    if len(given) > 1:
        raise InvalidParameterCombination(f"The parameters {where}.{given[0]} and {where}.{given[1]} are mutually "
                                          "exclusive and you have specified both; give one of them per datum.")
    values, counts = datum.get("Values"), datum.get("Counts")
    if counts is not None and values is None:
        raise MissingParameter(f"The parameter {where}.Values is required when {where}.Counts is given.")
    if values is not None:
        if len(values) > MAX_VALUES:
            raise InvalidParameterValue(f"The collection {where}.Values must not have a size greater than "
                                        f"{MAX_VALUES}; put the other values in another datum.")
        if counts is not None and len(counts) != len(values):
            raise InvalidParameterValue(f"The parameters {where}.Values and {where}.Counts must be of the same "
                                        f"size ({len(values)} values, {len(counts)} counts).")
        for v, value in enumerate(values, 1):
            _check_value(f"{where}.Values.member.{v}", value)
        for c, count in enumerate(counts or [], 1):
            _check_value(f"{where}.Counts.member.{c}", count)
            if count < 0:
                raise InvalidParameterValue(f"The parameter {where}.Counts.member.{c} must not be negative; a "
                                            "count is how many times its value occurred.")
    if "Value" in datum:
        _check_value(f"{where}.Value", datum["Value"])
    if "StatisticValues" in datum:
        _check_statistics(f"{where}.StatisticValues", datum["StatisticValues"])
    if "Timestamp" in datum:
        _check_timestamp(f"{where}.Timestamp", epoch(datum["Timestamp"]), now)


def _check_statistics(where: str, stats: Body) -> None:
    for key in ("SampleCount", "Sum", "Minimum", "Maximum"):
        _check_value(f"{where}.{key}", stats[key])
    if stats["SampleCount"] <= 0:
        raise InvalidParameterValue(f"The parameter {where}.SampleCount must be greater than 0.")
    if stats["Minimum"] > stats["Maximum"]:
        raise InvalidParameterValue(f"The parameter {where}.Minimum must not be greater than {where}.Maximum.")


def _check_value(where: str, value: float) -> None:
    if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
        raise InvalidParameterValue(f"The value {value} for parameter {where} is invalid: values must be finite "
                                    "and within -2^360 to 2^360.")


def _check_length(where: str, text: str, most: int) -> None:
    if len(text) > most:
        raise InvalidParameterValue(f"The parameter {where} must be no longer than {most} characters (it has "
                                    f"{len(text)}).")


def _check_timestamp(where: str, at: float, now: float) -> None:
    if at < now - PAST_S:
        raise InvalidParameterValue(f"The parameter {where} must specify a time no more than two weeks in the past.")
    if at > now + FUTURE_S:
        raise InvalidParameterValue(f"The parameter {where} must specify a time no more than two hours in the "
                                    "future; check the sender's clock.")
