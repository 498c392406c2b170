"""CloudWatch's PutMetricData quotas: what is refused, with AWS's error and wording, and what fits."""

from __future__ import annotations

from typing import Any

import pytest

from pier.autoscaling.errors import (
    InvalidParameterCombination,
    InvalidParameterValue,
    MissingParameter,
    ScalingError,
)
from pier.autoscaling.quotas import check_put_metric_data

NOW = 1_700_000_000.0


def call(*data: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"Namespace": "Mine", "MetricData": list(data), **more}


def datum(**fields: Any) -> dict[str, Any]:
    return {"MetricName": "Queue", **fields}


REFUSED = [
    ("1001 metrics", call(*[datum(Value=1.0)] * 1001), InvalidParameterValue,
     "The collection MetricData must not have a size greater than 1000"),
    ("metrics counted with entities'", call(*[datum(Value=1.0)] * 600,
                                            EntityMetricData=[{"MetricData": [datum(Value=1.0)] * 401}]),
     InvalidParameterValue, "MetricData and EntityMetricData together"),
    ("3 entities", call(EntityMetricData=[{"MetricData": []}] * 3), InvalidParameterValue,
     "EntityMetricData must not have a size greater than 2"),
    ("151 values", call(datum(Values=[1.0] * 151)), InvalidParameterValue,
     "The collection MetricData.member.1.Values must not have a size greater than 150"),
    ("counts of another size", call(datum(Values=[1.0, 2.0], Counts=[1.0])), InvalidParameterValue,
     "MetricData.member.1.Values and MetricData.member.1.Counts must be of the same size"),
    ("counts without values", call(datum(Counts=[1.0])), MissingParameter, "MetricData.member.1.Values is required"),
    ("a negative count", call(datum(Values=[1.0], Counts=[-1.0])), InvalidParameterValue, "must not be negative"),
    ("an infinite count", call(datum(Values=[1.0], Counts=[float("inf")])), InvalidParameterValue,
     "Counts.member.1 is invalid"),
    ("NaN", call(datum(Value=float("nan"))), InvalidParameterValue, "MetricData.member.1.Value is invalid"),
    ("past 2^360", call(datum(Values=[2.0 ** 361])), InvalidParameterValue, "within -2^360 to 2^360"),
    ("Value and Values", call(datum(Value=1.0, Values=[1.0])), InvalidParameterCombination,
     "MetricData.member.1.Value and MetricData.member.1.Values are mutually exclusive"),
    ("Value and StatisticValues",
     call(datum(Value=1.0, StatisticValues={"SampleCount": 1.0, "Sum": 1.0, "Minimum": 1.0, "Maximum": 1.0})),
     InvalidParameterCombination, "mutually exclusive"),
    ("SampleCount 0", call(datum(StatisticValues={"SampleCount": 0.0, "Sum": 0.0, "Minimum": 0.0, "Maximum": 0.0})),
     InvalidParameterValue, "SampleCount must be greater than 0"),
    ("Minimum over Maximum",
     call(datum(StatisticValues={"SampleCount": 2.0, "Sum": 3.0, "Minimum": 2.0, "Maximum": 1.0})),
     InvalidParameterValue, "Minimum must not be greater than"),
    ("31 dimensions", call(datum(Value=1.0, Dimensions=[{"Name": f"d{i}", "Value": "v"} for i in range(31)])),
     InvalidParameterValue, "MetricData.member.1.Dimensions must not have a size greater than 30"),
    ("a long dimension value", call(datum(Value=1.0, Dimensions=[{"Name": "d", "Value": "v" * 1025}])),
     InvalidParameterValue, "Dimensions.member.1.Value must be no longer than 1024"),
    ("a long metric name", call({"MetricName": "m" * 256, "Value": 1.0}), InvalidParameterValue,
     "MetricName must be no longer than 255"),
    ("a long namespace", {"Namespace": "n" * 256, "MetricData": []}, InvalidParameterValue,
     "Namespace must be no longer than 255"),
    ("three weeks ago", call(datum(Value=1.0, Timestamp=NOW - 21 * 86_400)), InvalidParameterValue,
     "no more than two weeks in the past"),
    ("three hours ahead", call(datum(Value=1.0, Timestamp=NOW + 3 * 3_600)), InvalidParameterValue,
     "no more than two hours in the future"),
    ("the second entity's datum", call(EntityMetricData=[{"MetricData": []}, {"MetricData": [
        datum(Values=[1.0] * 151)]}]), InvalidParameterValue,
     "EntityMetricData.member.2.MetricData.member.1.Values must not have a size greater than 150"),
]


@pytest.mark.parametrize(("body", "error", "words"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_over_a_quota_is_refused_as_aws_words_it(body: dict[str, Any], error: type[ScalingError], words: str) -> None:
    with pytest.raises(error) as raised:
        check_put_metric_data(body, NOW)
    assert words in raised.value.message


def test_what_fits_every_quota_is_every_datum() -> None:
    full = [datum(Values=[float(v) for v in range(150)], Counts=[1e6] * 150,
                  Dimensions=[{"Name": f"d{i}", "Value": "v" * 1024} for i in range(30)], Timestamp=NOW - 3600)] * 999
    entity = datum(StatisticValues={"SampleCount": 3.0, "Sum": 6.0, "Minimum": 1.0, "Maximum": 3.0})
    body = call(*full, EntityMetricData=[{"MetricData": [entity]}])
    assert check_put_metric_data(body, NOW) == [*full, entity]
    assert check_put_metric_data(call(datum(Value=2.0 ** 360, Timestamp="2023-11-14T22:13:20Z")), NOW)
