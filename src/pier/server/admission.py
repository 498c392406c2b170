"""How many generation requests one copy takes at once (TGI's MAX_CONCURRENT_REQUESTS).

Past the limit a request is refused at once with 429 and Retry-After, so clients and the gateway
retry elsewhere instead of piling up behind a queue they cannot see. Everything runs on the event
loop, so a plain counter is enough.
"""

from __future__ import annotations

from types import TracebackType

from pier.errors import RETRY_AFTER_S, Overloaded


class Admission:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight = 0

    def enter(self) -> Ticket:
        if self.in_flight >= self.limit:
            raise Overloaded(
                f"Model is overloaded: {self.in_flight} requests are in flight and this copy takes at most "
                f"{self.limit} (MAX_CONCURRENT_REQUESTS); retry after {RETRY_AFTER_S} s, or raise the limit."
            )
        self.in_flight += 1
        return Ticket(self)


class Ticket:
    """One admitted request; releasing twice is harmless, so every exit path may release."""

    def __init__(self, admission: Admission) -> None:
        self._admission: Admission | None = admission

    def release(self) -> None:
        if self._admission is not None:
            self._admission.in_flight -= 1
            self._admission = None

    def hand_off(self) -> Ticket:
        """Move the turn to a new ticket (a stream that outlives the route), so leaving this one's
        `with` block does not release it."""
        successor = Ticket.__new__(Ticket)
        successor._admission, self._admission = self._admission, None
        return successor

    def __enter__(self) -> Ticket:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
