"""Stateful sessions, as SageMaker routes them: the calls of a session go to the copy that opened it, whose
prefix cache keeps the conversation, so each turn computes only what is new.

InvokeEndpoint with SessionId=NEW_SESSION opens one on the copy that answers, and the answer carries
`X-Amzn-SageMaker-New-Session-Id: <id>; Expires=<ISO 8601>`; later calls with SessionId=<id> (InvokeEndpoint or
InvokeEndpointWithResponseStream) go to that copy. A body of `{"requestType": "NEW_SESSION"}` or
`{"requestType": "CLOSE"}` (the SageMaker inference toolkit's session requests) is answered by the gateway itself,
`{}`, since pier's copies keep no state but their caches; the close answer carries
`X-Amzn-SageMaker-Closed-Session-Id`. A copy that answers with that header itself closes its session too.

SageMaker documents that a session's calls go to the instance that supports it, not what happens once that instance
is gone; pier's session goes on: when its copy is gone or stopped, its next call goes to another copy, which becomes
the session's (the conversation is recomputed there once).

The gateway holds them in memory, bounded (the least recently used past `limit` are forgotten) and each for `ttl_s`
from its opening (the toolkit's SAGEMAKER_SESSIONS_EXPIRATION default, 1200 s), and writes each opening, move and
end to its state folder (session_store.py), so a restarted gateway routes a session to its copy as before.
Unknown, closed and expired ids are a ValidationError that says to open a new session.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from pier.runtime.errors import InvalidInvocation
from pier.runtime.session_store import SessionStore

NEW_SESSION = "NEW_SESSION"
NEW_SESSION_HEADER = "X-Amzn-SageMaker-New-Session-Id"
CLOSED_SESSION_HEADER = "X-Amzn-SageMaker-Closed-Session-Id"
DEFAULT_TTL_S = 1200.0
DEFAULT_LIMIT = 100_000


@dataclass
class Session:
    id: str
    endpoint: str
    component: str  # the workload its copy serves
    copy_id: str
    expires: float  # wall-clock seconds

    @property
    def unit(self) -> str:
        """What the session's calls address: its inference component, or `<endpoint>/<variant>` without the fleet
        an update added (`@<fleet>`: neither component nor variant names hold an '@'), so it outlives updates."""
        return unit_of(self.component)

    @property
    def variant(self) -> str | None:
        """The variant of a classic endpoint's session (its calls go there when they name none); None for a
        component's."""
        return self.unit.split("/", 1)[1] if "/" in self.unit else None

    def addressed(self) -> str:
        return f"variant {self.variant}" if self.variant is not None else f"inference component {self.unit}"

    def header(self) -> str:
        """X-Amzn-SageMaker-New-Session-Id's value."""
        when = datetime.fromtimestamp(self.expires, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"{self.id}; Expires={when}"


class Sessions:
    """The open sessions of one gateway. Used from one event loop."""

    def __init__(self, *, ttl_s: float = DEFAULT_TTL_S, limit: int = DEFAULT_LIMIT,
                 clock: Callable[[], float] = time.time, store: SessionStore | None = None) -> None:
        self.ttl_s = ttl_s
        self.limit = limit
        self.clock = clock
        self.store = store
        self._open: OrderedDict[str, Session] = OrderedDict()
        for row in store.load(clock(), limit) if store is not None else ():
            session = Session(*row)
            self._open[session.id] = session

    def __len__(self) -> int:
        return len(self._open)

    def open(self, endpoint: str, component: str, copy_id: str) -> Session:
        session = Session(uuid.uuid4().hex, endpoint, component, copy_id, self.clock() + self.ttl_s)
        self._open[session.id] = session
        self._save(session)
        forgotten = []
        while len(self._open) > self.limit:
            forgotten.append(self._open.popitem(last=False)[0])
        self._forget(forgotten)
        return session

    def move(self, session: Session, copy_id: str) -> None:
        """The session's copy is now `copy_id` (its own was gone)."""
        session.copy_id = copy_id
        if session.id in self._open:
            self._save(session)

    def find(self, session_id: str, endpoint: str) -> Session:
        """The open session `session_id` of `endpoint`; InvalidInvocation when there is none."""
        session = self._open.get(session_id)
        if session is not None and session.expires <= self.clock():
            del self._open[session_id]
            self._forget([session_id])
            session = None
        if session is None or session.endpoint.lower() != endpoint.lower():
            # pier's words: SageMaker's for this case are not known.
            raise InvalidInvocation(
                f"Session {session_id} is not open on endpoint {endpoint}: it expired, was closed, or was never "
                f"opened there. Open a new one with SessionId={NEW_SESSION} and use the id its answer's "
                f"{NEW_SESSION_HEADER} header gives.")
        self._open.move_to_end(session_id)
        return session

    def close(self, session_id: str) -> bool:
        closed = self._open.pop(session_id, None) is not None
        if closed:
            self._forget([session_id])
        return closed

    def release(self) -> None:
        """Close the store (the gateway is stopping); the sessions stay in it for the next gateway."""
        if self.store is not None:
            self.store.close()

    def _save(self, session: Session) -> None:
        if self.store is not None:
            self.store.put(session.id, session.endpoint, session.component, session.copy_id, session.expires)

    def _forget(self, ids: list[str]) -> None:
        if self.store is not None and ids:
            self.store.delete(ids)


def unit_of(component: str) -> str:
    """A target's component (workload) as a session addresses it: see `Session.unit`."""
    return component.split("@", 1)[0]


def request_type(body: bytes) -> str | None:
    """`NEW_SESSION` or `CLOSE` for the toolkit's session requests, else None (an ordinary payload)."""
    if len(body) > 256 or body.lstrip()[:1] != b"{":
        return None
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    if not isinstance(parsed, dict) or set(parsed) != {"requestType"}:
        return None
    kind = parsed["requestType"]
    return kind if kind in (NEW_SESSION, "CLOSE") else None
