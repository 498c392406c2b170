"""How many generation requests one copy takes at once (TGI's MAX_CONCURRENT_REQUESTS).

Past the limit a request is refused at once with 429 and Retry-After, so clients and the gateway
retry elsewhere instead of piling up behind a queue they cannot see. Everything runs on the event
loop, so a plain counter is enough.
"""

from __future__ import annotations

from types import TracebackType

from pier.errors import RETRY_AFTER_S, InvalidRequest, Overloaded


class CopyAdmission:
    """`limit` requests at once; one request may run at most `most_sequences` sequences (n choices), the copy's
    concurrency (no more than the engine's parallel sequences), since its choices should all run at once."""

    def __init__(self, limit: int, most_sequences: int | None = None) -> None:
        self.limit = limit
        self.most_sequences = limit if most_sequences is None else min(limit, most_sequences)
        self.in_flight = 0

    def enter(self, turns: int = 1) -> Ticket:
        """Admit a request that runs `turns` sequences at once (n choices count as n requests)."""
        if turns > self.most_sequences:
            raise InvalidRequest(
                f"This request asks for {turns} choices at once, and each counts as one request against this "
                f"copy's concurrency of {self.most_sequences} (parallel sequences, MAX_CONCURRENT_REQUESTS): ask "
                f"for at most {self.most_sequences}, or send several requests.", param="n")
        if self.in_flight + turns > self.limit:
            raise Overloaded(
                f"Model is overloaded: {self.in_flight} requests are in flight and this copy takes at most "
                f"{self.limit} (MAX_CONCURRENT_REQUESTS); retry after {RETRY_AFTER_S} s, or raise the limit."
            )
        self.in_flight += turns
        return Ticket(self, turns)


class Ticket:
    """One admitted request; releasing twice is harmless, so every exit path may release."""

    def __init__(self, admission: CopyAdmission, turns: int = 1) -> None:
        self._admission: CopyAdmission | None = admission
        self._turns = turns

    def release(self) -> None:
        if self._admission is not None:
            self._admission.in_flight -= self._turns
            self._admission = None

    def hand_off(self) -> Ticket:
        """Move the turn to a new ticket (a stream that outlives the route), so leaving this one's
        `with` block does not release it."""
        successor = Ticket.__new__(Ticket)
        successor._admission, self._admission = self._admission, None
        successor._turns = self._turns
        return successor

    def __enter__(self) -> Ticket:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
