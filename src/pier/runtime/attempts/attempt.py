"""What one attempt of a request on a copy came to, and so what the gateway does next: the pure heart of the
attempt loop (answer.py).

A request that never reached a copy, or that a copy refused before any work (it is full, shutting down or
loading: its answer says so with X-Pier-Refused, or it is a 429), goes to another copy: nothing ran. One that
reached a copy is never sent twice, since it may be running, unless that copy answers in frames
(pier.runtime.attempts.resume): the request is then *framed* from there on, and each next copy continues it from the
frames already relayed, so the answer that copy gives must be in frames too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from pier.runtime.attempts.call import Call
from pier.runtime.errors import InvocationError, ModelError, Origin, ServiceUnavailable, Throttled
from pier.runtime.settings import ResumeSettings

OVERLOADED = 429  # a copy's answer when it is already working on all it takes


class Outcome(StrEnum):
    UNREACHABLE = "unreachable"  # it never reached the copy (or a copy known to resume died before answering)
    THROTTLED = "throttled"  # the copy is full (429): another copy; Throttled when no copy is left
    REFUSED = "refused"  # refused before any work (full, shutting down, loading): another copy
    FRAMED = "framed"  # the copy answers in frames: read on, to its head
    ANSWERED = "answered"  # the answer's head: the client's
    CONTINUED = "continued"  # a continuation's head: the client has the first one; read on
    FAILED = "failed"  # a continuation's error head: the request ends with it
    BROKEN = "broken"  # the connection broke once the request may have run: a ModelError
    STRANDED = "stranded"  # a plain answer to a framed request: it cannot go on from the frames


NEXT_COPY = frozenset({Outcome.UNREACHABLE, Outcome.THROTTLED, Outcome.REFUSED})


@dataclass(frozen=True)
class Reply:
    """What an attempt came back with: a status and what its headers say, or no answer at all."""

    status: int | None = None  # None: no answer came
    reached: bool = True  # False: the request never reached the copy (no connection, no address)
    refused: bool = False  # X-Pier-Refused: the copy did none of the work
    framed: bool = False  # X-Pier-Frames: the body is frames, the copy's real head among them
    in_frames: bool = False  # this is that real head (an H frame)


NOT_REACHED = Reply(reached=False)
CUT = Reply()  # sent, and the connection broke before an answer


@dataclass(frozen=True)
class Situation:
    """Where the request stands when a reply comes."""

    framed: bool = False  # a copy answered it in frames before: it goes on in frames
    resumed: bool = False  # a copy failed under it, so it must be finished: a refusal is never its answer
    headed: bool = False  # the client has the answer's head
    others: bool = False  # a ready copy it has not tried (nor seen die under it)
    known: bool = False  # this copy answered in frames before, and resuming is on


def classify(reply: Reply, now: Situation) -> Outcome:
    if not reply.reached:
        return Outcome.UNREACHABLE
    if reply.status is None:  # nothing reached the client; a copy on pier's engine died (or was gone)
        return Outcome.UNREACHABLE if now.framed or now.known else Outcome.BROKEN
    if reply.in_frames:
        return _head(reply.status, reply.refused, now)
    if reply.framed:
        return Outcome.FRAMED
    if reply.status == OVERLOADED:
        return Outcome.THROTTLED
    if now.framed:
        return Outcome.STRANDED
    # The last copy's refusal is the answer: it says why (shutting down, loading).
    return Outcome.REFUSED if reply.refused and now.others else Outcome.ANSWERED


def _head(status: int, refused: bool, now: Situation) -> Outcome:
    if refused and (now.resumed or now.headed or now.others):  # a resumed request waits for a copy instead
        return Outcome.REFUSED
    if not now.headed:
        return Outcome.ANSWERED
    return Outcome.CONTINUED if 200 <= status < 300 else Outcome.FAILED


class Fate(StrEnum):
    """What becomes of a framed request when the copy running it dies (or gives it up)."""

    RESUMED = "resumed"  # another copy goes on from the frames
    STOPPED = "stopped"  # the gateway is shutting down: it ends in its protocol
    CONDEMNED = "condemned"  # it was on `poison_copies` copies when they died: it ends, and is refused a while
    EXHAUSTED = "exhausted"  # it was resumed `attempts` times already: it ends


def fate(deaths: int, resumes: int, settings: ResumeSettings, *, stopping: bool = False) -> Fate:
    """`deaths`: the copies that died under the request, this one included; `resumes`: how often it went on."""
    if stopping:
        return Fate.STOPPED
    if deaths >= settings.poison_copies:
        return Fate.CONDEMNED
    if resumes >= settings.attempts:
        return Fate.EXHAUSTED
    return Fate.RESUMED


def none_took_it(call: Call, tried: Sequence[str], full: Sequence[str]) -> InvocationError:
    """How a request ends that no copy took: a throttle when a copy said it was full, else unavailable."""
    if full:
        return Throttled(
            f"Inference component {call.target.component} on endpoint {call.endpoint} is busy: copy "
            f"{', '.join(full)} answered that it is working on all it takes, and no other copy could take the "
            "request. Retry with backoff, or add copies."
        )
    return ServiceUnavailable(
        f"No copy of {call.target.component} on endpoint {call.endpoint} could take the request (tried "
        f"{', '.join(tried)}); they may be restarting or shutting down. Retry shortly."
    )


def gave_up(origin: Origin, cause: str, resumes: int, tokens: int) -> InvocationError:
    """How a framed request ends that no copy could go on with: `origin`'s copy failed it for `cause`."""
    if resumes == 0 and not tokens:
        return origin.broken(ConnectionError(cause))
    message = (
        f"The request could not be completed: copy {origin.copy_id} failed ({cause}) after {resumes} resume(s) "
        f"on other copies and {tokens} generated tokens. Retry the request; if copies keep failing, read their "
        "logs (pier logs)."
    )
    return ModelError(message, original_status=0, original_message=message, log_stream_arn=origin.log_stream_arn)
