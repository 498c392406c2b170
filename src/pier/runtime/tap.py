"""What the runtime tells whoever taps an endpoint's traffic (the gateway's data capture and shadow variants),
without importing them: asked once per request what to do with it (`TapPlan`), told of each answer it asked to see
(`Exchanged`). Both calls run on the event loop and must return at once."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Protocol

from pier.runtime.invocation import Invocation

DEFAULT_CONTENT_TYPE = "application/octet-stream"  # what SageMaker assumes of a body without one


@dataclass(frozen=True)
class TapPlan:
    capture: bool = False  # this request and its answer were sampled for data capture
    shadows: tuple[str, ...] = ()  # shadow variants that also get this request (sampled at their weight)


NOTHING = TapPlan()


@dataclass(frozen=True)
class Exchanged:
    """A request and the answer its variant gave, whole (a stream's parts joined)."""

    endpoint: str
    variant: str
    request: bytes
    request_type: str
    response: bytes
    response_type: str
    request_id: str
    inference_id: str | None
    at: float  # epoch seconds, when the request arrived


class Tap(Protocol):
    def plan(self, endpoint: str, variant: str) -> TapPlan:
        """What to do with a request the variant is about to answer."""
        ...

    def exchanged(self, exchange: Exchanged) -> None:
        """An answer the plan asked to capture; never raises into the request."""
        ...


def exchange_of(invocation: Invocation, variant: str, answer: bytes, content_type: str | None) -> Exchanged:
    """The exchange of `invocation` with `variant`, which answered `answer` (on the event loop)."""
    arrived = time.time() - (asyncio.get_running_loop().time() - invocation.received_at)  # it keeps loop time
    return Exchanged(invocation.endpoint, variant, invocation.body, invocation.content_type or DEFAULT_CONTENT_TYPE,
                     answer, content_type or DEFAULT_CONTENT_TYPE, invocation.request_id, invocation.inference_id,
                     arrived)
