"""The recorder's AWS/SageMaker metrics per request, and the average concurrency it derives from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from pier.autoscaling.autoscaling_store import Store
from pier.autoscaling.history import History, MetricId
from pier.autoscaling.recorder import NAMESPACE, Recorder, error_kind
from pier.runtime.observer import Invoked


def test_requests_that_ended_give_the_average_concurrency_since_the_last_sample(tmp_path: Path) -> None:
    recorder = Recorder(History(Store.open(tmp_path), retention_s=60, clock=lambda: 1000.0))
    assert recorder.busy("ic", 100.0) == 0.0  # the first sample has nothing to average over
    for seconds in (0.3, 0.5, 0.2):  # three short requests, each shorter than the sampling interval
        recorder.invoked(Invoked("e", "AllTraffic", "ic", 200, seconds - 0.05, 0.05, 1))
    assert recorder.busy("ic", 102.0) == 0.5  # one second of requests in two seconds
    assert recorder.busy("ic", 103.0) == 0.0


def test_each_request_is_an_invocation_with_its_latencies_and_errors(tmp_path: Path) -> None:
    history = History(Store.open(tmp_path), retention_s=60, clock=lambda: 1000.0)
    recorder = Recorder(history)
    recorder.invoked(Invoked("e", "AllTraffic", "ic", 200, 0.25, 0.01, 2))
    recorder.invoked(Invoked("e", "AllTraffic", "ic", 424, 0.5, 0.02, 2, model_status=500))  # ModelError of a 500
    component = {"InferenceComponentName": "ic"}

    def second(name: str, dims: dict[str, str]) -> tuple[float, float, float]:
        [bucket] = history.seconds(MetricId.of(NAMESPACE, name, dims), 0, 2000)
        return bucket.count, bucket.total, bucket.high

    assert second("Invocations", component) == (2, 2.0, 1.0)
    assert second("Invocations", {"EndpointName": "e", "VariantName": "AllTraffic"}) == (2, 2.0, 1.0)
    # AWS counts "InvokeEndpoint requests where the model returned a 5xx HTTP response code" in
    # Invocation5XXErrors (docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html): the model's own
    # 500 is a 5XX, though its client gets a ModelError (424).
    assert second("Invocation4XXErrors", component) == (2, 0.0, 0.0)
    assert second("Invocation5XXErrors", component) == (2, 1.0, 1.0)
    assert second("InvocationsPerCopy", component) == (2, 1.0, 0.5)  # 1/2 per request on two copies
    assert second("ModelLatency", component)[2] == 500_000.0  # microseconds


@pytest.mark.parametrize(("status", "model_status", "kind"), [
    (200, None, None),  # the model's answer
    (424, 500, "5XX"),  # the model answered 500: the client's ModelError counts as the model's 5xx
    (424, 503, "5XX"),
    (424, 400, "4XX"),  # the model refused the input
    (424, 0, "5XX"),  # the model ran out of time or dropped the connection: it returned nothing
    (429, None, "4XX"),  # the gateway throttled it: counted by the status the client got
    (503, None, "5XX"),  # no copy could take it
])
def test_errors_count_by_the_models_own_status(status: int, model_status: int | None, kind: str | None) -> None:
    assert error_kind(Invoked("e", "AllTraffic", "ic", status, 0.1, 0.0, 1, model_status=model_status)) == kind
