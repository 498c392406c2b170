"""Reading Application Auto Scaling's and CloudWatch's request bodies."""

from __future__ import annotations

import json

import pytest

from pier.autoscaling.wire import LARGE_JSON_BYTES, loads_json


@pytest.mark.parametrize("size", [10, 300_000])
def test_a_large_json_body_reads_as_json_loads_reads_it(size: int) -> None:
    body = json.dumps({"MetricData": [{"Values": [1.5, 2e6], "Name": "é"}] * (size // 40 + 1)}).encode()
    assert (len(body) > LARGE_JSON_BYTES) == (size > LARGE_JSON_BYTES)
    assert loads_json(body) == json.loads(body)
    with pytest.raises(ValueError):
        loads_json(body[:-1])
