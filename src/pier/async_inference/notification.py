"""What an asynchronous request's end tells its endpoint's NotificationConfig topics, in the message SageMaker
publishes to SNS. pier has no SNS: a topic that is an http(s):// URL (pier's own) is POSTed the message; an SNS topic
ARN is POSTed, wrapped as SNS wraps it ({"Type": "Notification", "TopicArn", "Message"}), to the gateway's
PIER_ASYNC_NOTIFICATION_URL when it has one. Every notification is logged either way. A delivery that fails is logged
and not retried: the answer itself is already where the caller looks for it."""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from pier.async_inference.queue import AsyncRequest
from pier.control.shapes import AsyncNotificationSpec

log = logging.getLogger("pier.async")
DELIVERY_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class AsyncOutcome:
    """How one request ended."""

    succeeded: bool
    content_type: str | None = None
    answer: bytes | None = None  # the model's answer (success), included when IncludeInferenceResponseIn says so
    reason: str = ""  # why it failed


def message(request: AsyncRequest, outcome: AsyncOutcome, region: str, include_response: bool, now: float
            ) -> dict[str, Any]:
    """The notification SageMaker publishes for a request that ended."""
    body: dict[str, Any] = {
        "awsRegion": region, "eventTime": _iso(now), "receivedTime": _iso(request.received),
        "invocationStatus": "Completed" if outcome.succeeded else "Failed",
        "requestParameters": {"accept": request.accept or "", "contentType": request.content_type or "",
                              "customAttributes": request.custom_attributes or "",
                              "endpointName": request.endpoint, "inputLocation": request.input_location or ""},
        "inferenceId": request.inference_id, "eventVersion": "1.0", "eventSource": "aws:sagemaker",
        "eventName": "InferenceResult",
    }
    if outcome.succeeded:
        body["responseParameters"] = {"contentType": outcome.content_type or "",
                                      "outputLocation": request.output_location}
    else:
        body["failureReason"] = outcome.reason
        body["responseParameters"] = {"failureLocation": request.failure_location}
    if include_response and outcome.answer is not None:
        body["responseBody"] = {"content": outcome.answer.decode("utf-8", "replace"), "message": "",
                                "encoding": "string"}
    return body


def topic_for(config: AsyncNotificationSpec | None, succeeded: bool) -> tuple[str | None, bool]:
    """The topic an outcome goes to, and whether the answer is included in its message."""
    if config is None:
        return None, False
    topic = config.SuccessTopic if succeeded else config.ErrorTopic
    kind = "SUCCESS_NOTIFICATION_TOPIC" if succeeded else "ERROR_NOTIFICATION_TOPIC"
    return topic, kind in (config.IncludeInferenceResponseIn or [])


def delivery(topic: str, body: dict[str, Any], relay: str | None) -> tuple[str, dict[str, Any]] | None:
    """Where a notification is POSTed and what: the topic itself when it is a URL, else the relay (SNS's
    envelope), else nowhere (None)."""
    if topic.startswith(("http://", "https://")):
        return topic, body
    if not relay:
        return None
    return relay, {"Type": "Notification", "MessageId": str(uuid.uuid4()), "TopicArn": topic,
                   "Message": json.dumps(body), "Timestamp": _iso(time.time())}


async def notify(config: AsyncNotificationSpec | None, request: AsyncRequest, outcome: AsyncOutcome, region: str,
                 client: httpx.AsyncClient, relay: str | None = None) -> None:
    """Publish how `request` ended; `relay` (PIER_ASYNC_NOTIFICATION_URL) takes what goes to an SNS topic."""
    topic, include = topic_for(config, outcome.succeeded)
    if topic is None:
        return
    body = message(request, outcome, region, include, time.time())
    log.info("async inference %s %s: notifying %s", request.inference_id, body["invocationStatus"].lower(), topic)
    found = delivery(topic, body, relay)
    if found is None:
        return
    url, payload = found
    try:
        reply = await client.post(url, json=payload, timeout=DELIVERY_TIMEOUT_S)
        reply.raise_for_status()
    except httpx.HTTPError as error:
        log.warning("async inference %s: the notification to %s failed (%r); the answer is at its location all the "
                    "same", request.inference_id, url, error)


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
