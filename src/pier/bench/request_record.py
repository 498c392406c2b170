"""What the client saw of one request: when each token arrived, what it cost, and how it ended."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# "usage": the server's own count (OpenAI `usage`, TGI `details`); "chunks": streamed token-bearing events
# counted by the client; "planned": what the workload asked for, when the server reports nothing.
TokenSource = Literal["usage", "chunks", "planned"]


class RequestFailed(Exception):
    """A request ended badly; `code` is what the results count it under (an HTTP status, `timeout`, ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class RequestRecord:
    """One request's timeline. Times in `token_times` and `end` are seconds after `start`."""

    index: int
    conversation: int
    round: int  # its place in its conversation (the report's "turn")
    start: float = 0.0  # time.perf_counter() when the request was sent
    token_times: list[float] = field(default_factory=list)  # arrival of each token-bearing chunk
    end: float | None = None  # the response complete (or failed)
    output_tokens: int = 0
    output_tokens_source: TokenSource = "chunks"
    input_tokens: int = 0
    input_tokens_source: TokenSource = "planned"
    error_code: str | None = None
    error_message: str = ""
    text: str = ""  # the reply, which the next round of a conversation sends back

    @property
    def ok(self) -> bool:
        return self.error_code is None

    @property
    def ttft(self) -> float | None:
        return self.token_times[0] if self.token_times else None

    @property
    def latency(self) -> float | None:
        """vLLM's end-to-end latency: until the last token-bearing chunk (a trailing usage event is no token)."""
        return self.token_times[-1] if self.token_times else None

    @property
    def itl(self) -> list[float]:
        """Gaps between consecutive token-bearing chunks (vLLM's inter-token latencies)."""
        return [later - earlier for earlier, later in zip(self.token_times, self.token_times[1:], strict=False)]

    def fail(self, code: str, message: str) -> None:
        """The first failure wins: a stream cut after an error event keeps the error event's code."""
        if self.error_code is None:
            self.error_code = code
            self.error_message = message
