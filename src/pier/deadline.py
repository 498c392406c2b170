"""When a request still running is ended with an error, for a client that waits a given time for its answer.

Shared by the model server (SAGEMAKER_MODEL_SERVER_TIMEOUT) and the gateway's SageMaker routes
(PIER_INVOCATION_TIMEOUT_SECONDS); imports nothing of pier.
"""

from __future__ import annotations

MARGIN_S = 2.0  # at most this much before the client's timeout
MARGIN_SHARE = 0.1  # and at most this share of it, for short timeouts


def before_client_gives_up(timeout_s: float) -> float:
    """A little before `timeout_s`, so the error reaches a client whose own timeout is that number (boto3's 60 s)
    before it gives up and reports a timeout instead."""
    return timeout_s - min(MARGIN_S, timeout_s * MARGIN_SHARE)
