"""What an asynchronous request's end tells its topics, and where pier delivers it without SNS."""

from __future__ import annotations

import json

import pytest

from pier.async_inference.notification import AsyncOutcome, delivery, message, topic_for
from pier.async_inference.queue import AsyncRequest
from pier.control.shapes import AsyncNotificationSpec

REQUEST = AsyncRequest("id", "mine", "e", "s3://b/out/id.out", "s3://b/failed/id-error.out", received=0.0, ttl_s=60,
                       timeout_s=900, input_location="s3://b/in.json", content_type="application/json")
ARN = "arn:aws:sns:us-east-1:123456789012:done"


def test_a_success_message_is_sagemakers_with_the_answer_when_asked() -> None:
    body = message(REQUEST, AsyncOutcome(True, "application/json", b'{"a": 1}'), "us-east-1", True, 1.5)
    assert body["invocationStatus"] == "Completed" and body["inferenceId"] == "mine"
    assert body["eventTime"] == "1970-01-01T00:00:01.500Z" and body["eventName"] == "InferenceResult"
    assert body["requestParameters"]["inputLocation"] == "s3://b/in.json"
    assert body["responseParameters"] == {"contentType": "application/json", "outputLocation": "s3://b/out/id.out"}
    assert body["responseBody"]["content"] == '{"a": 1}'


def test_a_failure_message_has_the_reason_and_where_it_is() -> None:
    body = message(REQUEST, AsyncOutcome(False, reason="expired"), "us-east-1", False, 0.0)
    assert body["invocationStatus"] == "Failed" and body["failureReason"] == "expired"
    assert body["responseParameters"] == {"failureLocation": "s3://b/failed/id-error.out"}
    assert "responseBody" not in body


@pytest.mark.parametrize(("succeeded", "topic", "include"), [(True, ARN, True), (False, "https://hooks/x", False)])
def test_each_outcome_goes_to_its_topic(succeeded: bool, topic: str, include: bool) -> None:
    config = AsyncNotificationSpec(SuccessTopic=ARN, ErrorTopic="https://hooks/x",
                                   IncludeInferenceResponseIn=["SUCCESS_NOTIFICATION_TOPIC"])
    assert topic_for(config, succeeded) == (topic, include)
    assert topic_for(None, succeeded) == (None, False)


def test_a_url_topic_is_posted_the_message_and_an_sns_topic_goes_to_the_relay_in_snss_envelope() -> None:
    assert delivery("https://hooks/x", {"a": 1}, None) == ("https://hooks/x", {"a": 1})
    assert delivery(ARN, {"a": 1}, None) is None  # no relay: logged only
    found = delivery(ARN, {"a": 1}, "http://relay/")
    assert found is not None
    url, envelope = found
    assert url == "http://relay/" and envelope["TopicArn"] == ARN and json.loads(envelope["Message"]) == {"a": 1}


def test_a_topic_is_an_sns_arn_or_a_url() -> None:
    with pytest.raises(ValueError, match="neither an SNS topic ARN"):
        AsyncNotificationSpec(SuccessTopic="my-topic")
