"""A request retried within its caller's budget (pier.runtime.attempts.retry): the pure decisions case by case,
then the loop itself against fake copies (an httpx MockTransport stands for each copy's model server)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import pytest

from pier.backends.base import CopyState, CopyStatus
from pier.channel.copy_secret import copy_secret_header
from pier.runtime.attempts import Call, Declined, Forwarder, RetryBudget, Spent, Target, send_retried
from pier.runtime.attempts.retry import Move, avoid, backoff_s, move
from pier.runtime.errors import InvocationError, ModelError, ModelNotReady, ServiceUnavailable, Throttled
from pier.runtime.settings import RuntimeSettings

THREE = RetryBudget(retries=3)
NONE = RetryBudget(retries=0)
BROKEN = ModelError("the connection broke", original_status=0, original_message="", log_stream_arn="")

MOVES: list[tuple[str, int | InvocationError, int, RetryBudget, Move]] = [
    ("an answer", 200, 0, THREE, Move.ANSWERED),
    ("an empty answer, after failures", 204, 2, THREE, Move.ANSWERED),
    ("a copy's 429: not a failure", 429, 3, THREE, Move.AGAIN),
    ("every copy busy", Throttled("busy"), 3, THREE, Move.AGAIN),
    ("no copy ready (or the gateway stopping)", ServiceUnavailable("none"), 0, NONE, Move.AGAIN),
    ("the model still loading", ModelNotReady("loading"), 0, NONE, Move.AGAIN),
    ("the model declines it", 400, 0, THREE, Move.DECLINED),
    ("the model cannot read it", 422, 0, THREE, Move.DECLINED),
    ("a copy's 500, the first failure", 500, 0, THREE, Move.RETRY),
    ("a copy's 503, the third failure", 503, 2, THREE, Move.RETRY),
    ("a copy's 500, one failure more than the retries", 500, 3, THREE, Move.SPENT),
    ("the connection broke, no retries", BROKEN, 0, NONE, Move.SPENT),
    ("the connection broke, one retry", BROKEN, 0, RetryBudget(retries=1), Move.RETRY),
]


@pytest.mark.parametrize(("case", "result", "failures", "budget", "expected"), MOVES, ids=[c[0] for c in MOVES])
def test_move(case: str, result: int | InvocationError, failures: int, budget: RetryBudget, expected: Move) -> None:
    assert move(result, failures, budget) is expected


@pytest.mark.parametrize(("failures", "wait"), [(1, 0.5), (2, 1.0), (3, 1.5)])
def test_backoff_grows_with_the_failures(failures: int, wait: float) -> None:
    assert backoff_s(failures, THREE) == pytest.approx(wait)


def copy(name: str, state: CopyState = CopyState.READY, concurrency: int = 2) -> CopyStatus:
    return CopyStatus(name, "transform.j/AllTraffic", state, url=f"http://{name}", concurrency=concurrency,
                      secret=f"secret-{name}")


AVOIDS = [
    ("a first try avoids nothing", None, [copy("a"), copy("b")], set()),
    ("a retry avoids the copy that failed it", "a", [copy("a"), copy("b")], {"a"}),
    ("unless it is the only ready one", "a", [copy("a")], set()),
    ("a copy gone since is avoided all the same", "a", [copy("b")], {"a"}),
    ("no ready copy: nothing to avoid", "a", [], set()),
]


@pytest.mark.parametrize(("case", "failed", "ready", "avoided"), AVOIDS, ids=[c[0] for c in AVOIDS])
def test_which_copies_a_retry_avoids(case: str, failed: str | None, ready: list[CopyStatus],
                                     avoided: set[str]) -> None:
    assert avoid(failed, ready) == avoided


# ---- the loop, against fake copies

Script = dict[str, list[int | type[httpx.TransportError]]]  # copy -> what it does with each request, in turn


class FakeCopies:
    """Copies that answer as scripted, recording which one got each request and with what headers."""

    def __init__(self, script: Script) -> None:
        self.script = {name: list(steps) for name, steps in script.items()}
        self.asked: list[str] = []
        self.secrets: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        name = request.url.host
        self.asked.append(name)
        self.secrets.append(request.headers.get(next(iter(copy_secret_header("x")))))
        step = self.script[name].pop(0) if len(self.script[name]) > 1 else self.script[name][0]
        if isinstance(step, type):
            raise step("scripted", request=request)
        return httpx.Response(step, content=f"{name} said {step}".encode())


def run(script: Script, budget: RetryBudget, copies: Callable[[], list[CopyStatus]] | None = None
        ) -> tuple[bytes | BaseException, FakeCopies]:
    fake = FakeCopies(script)
    statuses = copies or (lambda: [copy(name) for name in script])

    async def go() -> bytes:
        async with httpx.AsyncClient(transport=httpx.MockTransport(fake)) as client:
            forwarder = Forwarder(RuntimeSettings(), client)

            def fresh() -> Call:
                now = asyncio.get_running_loop().time()
                return Call("transform.j", Target.of("transform.j", statuses()), "/invocations", b"{}", {}, (),
                            now + 5, 5.0)

            return await asyncio.wait_for(send_retried(forwarder, fresh, budget), 10)

    try:
        return asyncio.run(go()), fake
    except (Declined, Spent) as error:
        return error, fake


FAST = RetryBudget(retries=1, backoff_s=0, wait_s=0)


def test_an_answer_comes_from_the_copy_with_its_secret() -> None:
    body, fake = run({"a": [200]}, FAST)
    assert body == b"a said 200" and fake.secrets == ["secret-a"]


def test_a_failed_try_is_retried_on_another_copy() -> None:
    for first in ("a", "b"):  # whichever the copy chooser picks first fails
        other = "b" if first == "a" else "a"
        body, fake = run({first: [500], other: [200]}, RetryBudget(retries=1, backoff_s=0, wait_s=0))
        if fake.asked[0] == first:
            assert body == f"{other} said 200".encode() and fake.asked == [first, other]
            return
    pytest.fail("the copy chooser never picked a copy first")


def test_the_budget_spent_ends_with_the_last_failure() -> None:
    error, fake = run({"a": [500]}, FAST)
    assert isinstance(error, Spent) and error.failures == 2 and error.last == "the model answered 500: a said 500"
    assert fake.asked == ["a", "a"]  # the only copy: the retry goes to it again


def test_a_declined_request_is_not_retried() -> None:
    error, fake = run({"a": [422, 200]}, FAST)
    assert isinstance(error, Declined) and error.status == 422 and error.body == b"a said 422"
    assert fake.asked == ["a"]


def test_a_full_copy_is_asked_again_without_spending_the_budget() -> None:
    body, fake = run({"a": [429, 429, 429, 200]}, RetryBudget(retries=0, backoff_s=0, wait_s=0))
    assert body == b"a said 200" and fake.asked == ["a"] * 4


def test_a_copy_that_cannot_be_reached_is_skipped_without_spending_the_budget() -> None:
    body, fake = run({"a": [httpx.ConnectError], "b": [200]}, RetryBudget(retries=0, backoff_s=0, wait_s=0))
    assert body == b"b said 200" and fake.asked[-1] == "b"


def test_a_broken_connection_is_a_failure() -> None:
    error, _ = run({"a": [httpx.ReadError]}, FAST)
    assert isinstance(error, Spent) and error.failures == 2 and "copy a" in error.last


def test_a_request_waits_for_a_copy_to_become_ready() -> None:
    polls: list[int] = []

    def copies() -> list[CopyStatus]:
        polls.append(1)
        return [copy("a", CopyState.READY if len(polls) > 3 else CopyState.STARTING)]

    body, _ = run({"a": [200]}, RetryBudget(retries=0, backoff_s=0, wait_s=0), copies)
    assert body == b"a said 200" and len(polls) == 4
