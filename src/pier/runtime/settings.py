"""How the gateway forwards invocations: deadlines, concurrency, and what ends up in error messages."""

from __future__ import annotations

from dataclasses import dataclass, field

from pier.runtime.router import DEFAULT_SLACK

MAX_PAYLOAD_BYTES = 6 * 1024 * 1024  # 6,291,456: what SageMaker's InvokeEndpoint accepts
BOTO3_READ_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ResumeSettings:
    """Requests resumed on another copy when theirs dies (pier.runtime.resume)."""

    attempts: int = 3  # the most times one request is resumed on another copy; 0 turns resuming off
    poison_copies: int = 2  # a request that was on this many copies when they died is not sent to another
    poison_memory_s: float = 600.0  # how long such a request is refused at once
    wait_s: float = 30.0  # the longest a request waits for a ready copy to resume on (within its deadline)


@dataclass(frozen=True)
class RuntimeSettings:
    # SageMaker routes: an invocation still running this long after it arrived ends with a 424 (a
    # ModelStreamError once streaming), early enough to reach a client whose read timeout is boto3's 60 s.
    deadline_s: float = BOTO3_READ_TIMEOUT_S - 2.0
    # OpenAI routes: None leaves the limit to the copy (its SAGEMAKER_MODEL_SERVER_TIMEOUT); clients wait longer.
    openai_deadline_s: float | None = None
    per_copy_concurrency: int = 32  # requests one ready copy is sent at once; the rest wait in the gateway
    queue: int = 512  # requests that may wait per component before ThrottlingException
    queue_timeout_s: float = 30.0  # the longest a request waits for a turn (never past its deadline)
    max_payload_bytes: int = MAX_PAYLOAD_BYTES
    connect_timeout_s: float = 2.0  # a copy that does not accept within this is skipped for another
    affinity_slack: int = DEFAULT_SLACK
    region: str = "us-east-1"  # for the ARNs in error messages
    account: str = "000000000000"
    resume: ResumeSettings = field(default_factory=ResumeSettings)
