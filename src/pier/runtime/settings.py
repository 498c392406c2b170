"""How the gateway forwards invocations: deadlines, concurrency, and what ends up in error messages.

A running gateway (`pier up`) reads its queue's bounds from PIER_QUEUE_SIZE (requests that may wait per
inference component) and PIER_QUEUE_TIMEOUT_SECONDS (the longest one waits for a copy with room), and the
SageMaker routes' time limit from PIER_INVOCATION_TIMEOUT_SECONDS (the client's read timeout: 60 s, boto3's, by
default; raise it, with the queue's, for clients that wait longer, such as a load test's users who must wait
rather than fail). On a streaming route that limit bounds the wait for the first part and each silence between
parts, so a stream that keeps flowing is not cut; PIER_STREAM_TIMEOUT_SECONDS, when set, bounds a whole stream.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from pier.deadline import before_client_gives_up
from pier.env import GATEWAY, Env, integer, number
from pier.runtime.copy_choice import DEFAULT_CONCURRENCY, DEFAULT_SLACK
from pier.runtime.sessions import DEFAULT_LIMIT, DEFAULT_TTL_S

MAX_PAYLOAD_BYTES = 6 * 1024 * 1024  # 6,291,456: what SageMaker's InvokeEndpoint accepts
BOTO3_READ_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ResumeSettings:
    """Requests resumed on another copy when theirs dies (pier.runtime.attempts.resume)."""

    attempts: int = 3  # the most times one request is resumed on another copy; 0 turns resuming off
    poison_copies: int = 2  # a request that was on this many copies when they died is not sent to another
    poison_memory_s: float = 600.0  # how long such a request is refused at once
    wait_s: float = 30.0  # the longest a request waits for a ready copy to resume on (within its deadline)


@dataclass(frozen=True)
class RuntimeSettings:
    # SageMaker routes: an invocation still running this long after it arrived ends with a 424 (a
    # ModelStreamError once streaming), early enough to reach a client whose read timeout is boto3's 60 s.
    deadline_s: float = before_client_gives_up(BOTO3_READ_TIMEOUT_S)
    # Streaming routes: a whole stream ends past this (None: no total bound; the deadline bounds its silences).
    stream_total_s: float | None = None
    # OpenAI routes: None leaves the limit to the copy (its SAGEMAKER_MODEL_SERVER_TIMEOUT); clients wait longer.
    openai_deadline_s: float | None = None
    # Requests a copy is sent at once when its backend does not report its own concurrency (pier.channel.concurrency:
    # MAX_CONCURRENT_REQUESTS and the engine's parallel sequences, which the local backend reads from the
    # environment each copy runs with). More wait in the gateway's queue for the first copy with room.
    per_copy_concurrency: int = DEFAULT_CONCURRENCY
    queue: int = 512  # requests that may wait per component; one more is a ThrottlingException (429) at once
    queue_timeout_s: float = 30.0  # the longest a request waits for a copy with room (never past its deadline)
    max_payload_bytes: int = MAX_PAYLOAD_BYTES
    connect_timeout_s: float = 2.0  # a copy that does not accept within this is skipped for another
    affinity_slack: int = DEFAULT_SLACK
    region: str = "us-east-1"  # for the ARNs in error messages
    account: str = "000000000000"
    resume: ResumeSettings = field(default_factory=ResumeSettings)
    session_ttl_s: float = DEFAULT_TTL_S  # a stateful session's life from its opening (PIER_SESSION_TTL_SECONDS)
    max_sessions: int = DEFAULT_LIMIT  # open sessions kept; past this, the least recently used are forgotten

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RuntimeSettings:
        """The defaults, with the queue's bounds and the time limits from the environment; a value that is not a
        number (or is negative) is an error that names the variable."""
        read, defaults = Env(env, GATEWAY), cls()
        seconds = number("a number of seconds, 0 or more", low=0)
        invocation = read.get("PIER_INVOCATION_TIMEOUT_SECONDS", cast=number(
            "a number of seconds the clients wait for an answer (default 60)", above=0))
        return replace(
            defaults,
            queue=read.get("PIER_QUEUE_SIZE", cast=integer("a number of requests, 0 or more", low=0),
                           default=defaults.queue),
            queue_timeout_s=read.get("PIER_QUEUE_TIMEOUT_SECONDS", cast=seconds, default=defaults.queue_timeout_s),
            deadline_s=defaults.deadline_s if invocation is None else before_client_gives_up(invocation),
            stream_total_s=read.get("PIER_STREAM_TIMEOUT_SECONDS", cast=seconds) or None,  # 0: no total bound
            session_ttl_s=read.get("PIER_SESSION_TTL_SECONDS", cast=seconds, default=defaults.session_ttl_s))
