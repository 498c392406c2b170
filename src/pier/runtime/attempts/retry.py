"""A request sent again while copies fail it, within its caller's budget: for callers nobody waits on to retry
(batch transform's records, under the job's ModelClientConfig.InvocationsMaxRetries).

The pure heart, `move()`, reads each try: an answer below 300 is the caller's; a 429, or a request no copy took
(all busy, none ready yet, the gateway stopping: nothing ran), is asked again after `RetryBudget.wait_s` and never
counted; another 4xx is the model declining the request, which another try would only repeat; a 5xx, a broken
connection or a try out of time is a failure, tried again after `backoff_s(failures)` on another copy than the one
that failed it (`avoid()`: the same one only when no other is ready), until the budget's retries are spent.
Each try is one Answer (answer.py): the copy choice, refusals and resuming are its.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from pier.backends.base import CopyStatus
from pier.runtime.attempts.answer import Answer
from pier.runtime.attempts.attempt import OVERLOADED
from pier.runtime.attempts.call import Call
from pier.runtime.attempts.forward import Forwarder
from pier.runtime.errors import InvocationError, ModelNotReady, ServiceUnavailable, Throttled

log = logging.getLogger(__name__)

NOT_TAKEN = (Throttled, ServiceUnavailable, ModelNotReady)  # no copy did any of the request's work
ERROR_TEXT = 400  # how much of a copy's error answer a failure's words keep


@dataclass(frozen=True)
class RetryBudget:
    retries: int  # failures tried again at most (a copy's 5xx, a broken connection, a try out of time)
    backoff_s: float = 0.5  # the n-th retry waits n times this first
    wait_s: float = 0.05  # how long a request no copy took waits before it asks again


class Move(StrEnum):
    """What a caller with a budget does after one try."""

    ANSWERED = "answered"  # below 300: the caller's
    DECLINED = "declined"  # the model's 4xx: the request as it is will not do anywhere
    AGAIN = "again"  # no copy took it: ask again, not a failure
    RETRY = "retry"  # a copy failed it: again, on another copy, after a backoff
    SPENT = "spent"  # it failed once more than the budget retries


def move(result: int | InvocationError, failures: int, budget: RetryBudget) -> Move:
    """`result`: the try's status, or the error it ended with; `failures`: the tries that failed before it."""
    if isinstance(result, NOT_TAKEN) or (isinstance(result, int) and result == OVERLOADED):
        return Move.AGAIN
    if isinstance(result, int) and result < 300:
        return Move.ANSWERED
    if isinstance(result, int) and result < 500:
        return Move.DECLINED
    return Move.SPENT if failures + 1 > budget.retries else Move.RETRY


def backoff_s(failures: int, budget: RetryBudget) -> float:
    """The wait before the retry that follows `failures` failures."""
    return budget.backoff_s * failures


def avoid(failed: str | None, ready: Sequence[CopyStatus]) -> frozenset[str]:
    """The copies a retry must not go to: the one that failed it, unless no other is ready."""
    if failed is None or not any(c.copy_id != failed for c in ready):
        return frozenset()
    return frozenset({failed})


class Declined(Exception):
    """The model declined the request (a 4xx): its status and what it said."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"the model answered {status}: {body[:ERROR_TEXT].decode(errors='replace')}")
        self.status = status
        self.body = body


class Spent(Exception):
    """Every try failed, the budget's retries included: how many, and the last failure in words."""

    def __init__(self, failures: int, last: str) -> None:
        super().__init__(f"failed {failures} times; last: {last}")
        self.failures = failures
        self.last = last


async def send_retried(forwarder: Forwarder, fresh: Callable[[], Call], budget: RetryBudget, *,
                       what: str = "") -> bytes:
    """The body of the first answer below 300 to the request `fresh()` builds (with its copies and its deadline as
    of each try). Raises Declined or Spent; `what` names the request in the log."""
    failures, failed = 0, None
    while True:
        call = fresh()
        call = replace(call, avoid=avoid(failed, call.target.ready()))
        result, body, copy = await _try(forwarder, call)
        next_move = move(result, failures, budget)
        if next_move is Move.ANSWERED:
            return body
        if next_move is Move.DECLINED:
            assert isinstance(result, int)
            raise Declined(result, body)
        if next_move is Move.AGAIN:
            await asyncio.sleep(budget.wait_s)
            continue
        failures += 1
        last = _said(result, body, copy)
        if next_move is Move.SPENT:
            raise Spent(failures, last)
        log.warning("%s: %s; retrying on another copy", what or call.endpoint, last)
        failed = copy
        await asyncio.sleep(backoff_s(failures, budget))


async def _try(forwarder: Forwarder, call: Call) -> tuple[int | InvocationError, bytes, str | None]:
    """One Answer: its status and body, or the error it ended with; and the copy it went to last."""
    answer = Answer(forwarder, call)
    try:
        await answer.open()
        return answer.head.status_code, await answer.read(), answer.copy_id
    except InvocationError as error:
        return error, b"", answer.asked
    finally:
        await answer.aclose()


def _said(result: int | InvocationError, body: bytes, copy: str | None) -> str:
    if isinstance(result, int):
        return f"the model answered {result}: {body[:ERROR_TEXT].decode(errors='replace')}"
    return f"copy {copy}: {result.message}" if copy else result.message
