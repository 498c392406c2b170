"""The SageMaker runtime over copies: InvokeEndpoint and InvokeEndpointWithResponseStream, plus OpenAI
passthrough, as methods the gateway's routes call (pier.runtime.http_api mounts them).

SageMaker semantics: a copy's error status becomes ModelError 424 (with the copy's status and body); no
ready copy is ModelNotReadyException 429 (loading) or ServiceUnavailable 503; a full queue is
ThrottlingException. The deadline counts from the request's arrival, so its error reaches a client whose
read timeout is the same number (boto3's 60 s) before that client retries the whole request. In a stream,
an error after the 200 is the last event: a ModelStreamError or InternalStreamFailure frame.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AsyncExitStack

import httpx
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive

from pier.channel.prefix import request_prefix
from pier.deadline import StreamClock
from pier.errors import CLIENT_CLOSED_REQUEST, ClientGone
from pier.runtime import eventstream, openai
from pier.runtime.admission import Admission
from pier.runtime.attempts import Answer, Call, Forwarder, PathOn, StreamEnded, answer_of
from pier.runtime.disconnect import unless_disconnected
from pier.runtime.errors import REQUEST_ID, InvalidInvocation, as_invocation_error, sagemaker_error
from pier.runtime.invocation import CUSTOM_ATTRIBUTES, INVOKED_VARIANT, STREAM_CONTENT_TYPE, Invocation
from pier.runtime.observer import InvocationObserver
from pier.runtime.routing_strategy import request_routing
from pier.runtime.session_store import SessionStore
from pier.runtime.sessions import (
    CLOSED_SESSION_HEADER,
    NEW_SESSION,
    NEW_SESSION_HEADER,
    Session,
    Sessions,
    request_type,
    unit_of,
)
from pier.runtime.settings import RuntimeSettings
from pier.runtime.shadowing import Shadowing
from pier.runtime.streaming import ClosingStream
from pier.runtime.tap import NOTHING, Tap, TapPlan, exchange_of
from pier.runtime.target import Resolve, Target, resolve_target
from pier.runtime.target_model import check_target_model

log = logging.getLogger(__name__)

EVENT_STREAM = "application/vnd.amazon.eventstream"
PART_BYTES = 64 * 1024  # the largest PayloadPart sent; bigger upstream chunks are split


class RuntimeService:
    """Owns the HTTP client to copies, the admission queues and the choosers; one per gateway."""

    def __init__(self, resolve: Resolve, settings: RuntimeSettings | None = None, *,
                 client: httpx.AsyncClient | None = None, observer: InvocationObserver | None = None,
                 session_store: SessionStore | None = None, tap: Tap | None = None,
                 path_on: PathOn | None = None, admission: Admission | None = None) -> None:
        self.resolve = resolve
        self.tap = tap  # data capture and shadow variants (gateway/taps.py)
        self.settings = settings or RuntimeSettings()
        self.forwarder = Forwarder(self.settings, client, observer, path_on, admission)
        self.sessions = Sessions(ttl_s=self.settings.session_ttl_s, limit=self.settings.max_sessions,
                                 store=session_store)
        self.shadowing = Shadowing(self.forwarder, resolve, tap) if tap is not None else None

    async def aclose(self) -> None:
        if self.shadowing is not None:
            await self.shadowing.aclose()
        await self.forwarder.aclose()

    async def invoke(self, invocation: Invocation, receive: Receive | None = None) -> Response:
        """InvokeEndpoint: the copy's answer, or a SageMaker error. Given `receive` (the ASGI channel, with the
        body already read), a client that disconnects cancels the upstream request."""
        try:
            work = self._invoke(invocation)
            return await (unless_disconnected(work, receive) if receive else work)
        except ClientGone:
            return Response(status_code=CLIENT_CLOSED_REQUEST)
        except Exception as error:
            return _error(error, invocation.request_id)

    async def invoke_stream(self, invocation: Invocation, receive: Receive | None = None) -> Response:
        """InvokeEndpointWithResponseStream: the copy's bytes as PayloadPart events, as they arrive. Given
        `receive`, a client that disconnects while its request waits for a turn or a copy cancels it."""
        resources = AsyncExitStack()
        try:
            work = self._open_stream(invocation, resources)
            opened = await (unless_disconnected(work, receive) if receive else work)
        except BaseException as error:
            await resources.aclose()
            if isinstance(error, ClientGone):
                return Response(status_code=CLIENT_CLOSED_REQUEST)
            if not isinstance(error, Exception):
                raise
            return _error(error, invocation.request_id)
        if isinstance(opened, Response):  # a session request, answered by the gateway
            return opened
        call, answer, plan = opened
        headers = _answer_headers(invocation, call.target, answer.head)
        headers[STREAM_CONTENT_TYPE] = answer.head.headers.get("content-type", "application/octet-stream")
        capture = None
        if plan.capture:
            def capture(whole: bytes) -> None:
                self._exchanged(invocation, call.target, whole, headers[STREAM_CONTENT_TYPE])
        return ClosingStream(self._frames(answer, capture), resources.aclose, headers=headers,
                             media_type=EVENT_STREAM)

    async def _open_stream(self, invocation: Invocation, resources: AsyncExitStack
                           ) -> tuple[Call, Answer, TapPlan] | Response:
        """A copy's successful answer, started; `resources` then hold its turn, lease and connection. A session
        request is answered here instead, as a one-part stream: the container standard's CLOSE reaches
        /invocations from InvokeEndpointWithResponseStream too, and pier's copies would not know it."""
        call, session = await self._call(invocation, streaming=True)
        if (kind := _session_kind(invocation)) is not None:
            return _streamed(self._session_request(invocation, call, session, kind))
        plan = self._plan(invocation, call.target)
        answer = await resources.enter_async_context(answer_of(self.forwarder, call))
        if not answer.head.is_success:
            raise answer.error(await answer.read())
        self._follow(session, answer)
        return call, answer, plan

    async def openai(self, request: Request, path: str, endpoint: str | None = None, *, sagemaker_path: bool = False,
                     component: str | None = None) -> Response:
        """OpenAI passthrough of `path` (chat completions, completions, embeddings, models) to a copy of `endpoint`, or
        of the endpoint the body's `model` names ("ENDPOINT" or "ENDPOINT/INFERENCE_COMPONENT"); see
        pier.runtime.openai for each route's rules."""
        return await openai.passthrough(self.forwarder, self.resolve, request, path, endpoint,
                                        sagemaker_path=sagemaker_path, component=component)

    async def _invoke(self, invocation: Invocation) -> Response:
        call, session = await self._call(invocation)
        if (kind := _session_kind(invocation)) is not None:
            return self._session_request(invocation, call, session, kind)
        plan = self._plan(invocation, call.target)
        async with answer_of(self.forwarder, call) as answer:
            body = await answer.read()
            if not answer.head.is_success:
                raise answer.error(body)
            headers = _answer_headers(invocation, call.target, answer.head)
            if "content-type" in answer.head.headers:  # as the copy wrote it: no charset added
                headers["Content-Type"] = answer.head.headers["content-type"]
            if invocation.session_id == NEW_SESSION:
                opened = self.sessions.open(invocation.endpoint, call.target.component, answer.copy_id)
                headers[NEW_SESSION_HEADER] = opened.header()
            self._follow(session, answer)
            if plan.capture:
                self._exchanged(invocation, call.target, body, answer.head.headers.get("content-type"))
            return Response(body, headers=headers)

    def _plan(self, invocation: Invocation, target: Target) -> TapPlan:
        """What the tap wants of this request; its shadow copies sent off. Never fails the request."""
        if self.tap is None or self.shadowing is None:
            return NOTHING
        try:
            plan = self.tap.plan(invocation.endpoint, target.variant)
            if plan.shadows and invocation.session_id is None:  # a session's requests belong to its copy
                self.shadowing.mirror(invocation, plan.shadows)
            return plan
        except Exception:
            log.exception("tapping a request of %s failed; it goes on untapped", invocation.endpoint)
            return NOTHING

    def _exchanged(self, invocation: Invocation, target: Target, answer: bytes, content_type: str | None) -> None:
        assert self.tap is not None
        try:
            self.tap.exchanged(exchange_of(invocation, target.variant, answer, content_type))
        except Exception:
            log.exception("capturing a request of %s failed; its answer went out regardless", invocation.endpoint)

    def _session_request(self, invocation: Invocation, call: Call, session: Session | None, kind: str) -> Response:
        """The toolkit's own session requests, answered here: the copies keep no session state to open or close."""
        headers = {INVOKED_VARIANT: call.target.variant, REQUEST_ID: invocation.request_id,
                   "Content-Type": "application/json"}
        if kind == "CLOSE":
            if session is None:  # SessionId=NEW_SESSION: nothing to close, and a CLOSE must not open one
                raise InvalidInvocation(
                    f"A CLOSE request closes the session its SessionId names, not {NEW_SESSION}: send it with the "
                    f"session's id, as the answer that opened it gave it in NewSessionId ({NEW_SESSION_HEADER}).")
            self.sessions.close(session.id)
            headers[CLOSED_SESSION_HEADER] = session.id
        elif invocation.session_id == NEW_SESSION:
            opened = self.sessions.open(invocation.endpoint, call.target.component, self._session_copy(call))
            headers[NEW_SESSION_HEADER] = opened.header()
        return Response(b"{}", headers=headers)

    def _session_copy(self, call: Call) -> str:
        """The copy a session opened without a generation goes to: the copy chooser's choice, or when every copy is busy
        the least busy ready one (nothing runs on it now: the session only needs to know its copy)."""
        chooser = self.forwarder.chooser(call.target.component)
        lease = chooser.pick(call.target.copies, call.prefix, route=call.route)
        if lease is not None:
            lease.release()
            return lease.copy.copy_id
        ready = call.target.ready()
        if not ready:
            raise call.target.unavailable(call.endpoint)
        return min(ready, key=lambda c: (chooser.outstanding(c.copy_id), c.copy_id)).copy_id

    def _follow(self, session: Session | None, answer: Answer) -> None:
        """The session moves to the copy that answered (its own copy was gone), or ends if the copy closed it."""
        if session is None:
            return
        if CLOSED_SESSION_HEADER in answer.head.headers:
            self.sessions.close(session.id)
        elif answer.copy_id != session.copy_id:
            log.info("session %s moved from copy %s to %s", session.id, session.copy_id, answer.copy_id)
            self.sessions.move(session, answer.copy_id)

    async def _call(self, invocation: Invocation, *, streaming: bool = False) -> tuple[Call, Session | None]:
        variant = invocation.variant

        def resolve() -> Awaitable[Target]:  # `variant` as last set: a session's own, once known
            return resolve_target(self.resolve, invocation.endpoint, invocation.component, variant)

        target = await resolve()
        if (unsupported := invocation.unsupported()) is not None:
            raise unsupported
        check_target_model(invocation.endpoint, invocation.request_id, invocation.target_model, target.models)
        session = self._session(invocation)
        if session is not None and variant is None and session.unit != unit_of(target.component):
            # A classic endpoint's weights picked another variant: SageMaker sends a session's calls to its instance.
            variant = session.variant
            target = await resolve()
        if session is not None and session.unit != unit_of(target.component):
            raise InvalidInvocation(
                f"Session {session.id} was opened on {session.addressed()}, not {_addressed(target)}: call it with "
                "the same InferenceComponentName (and TargetVariant) it was opened with, or open a new session.")
        ready = {c.copy_id for c in target.ready()}
        pin = session.copy_id if session is not None and session.copy_id in ready else None  # else: it moves
        deadline_s = self.settings.deadline_s
        clock = StreamClock(invocation.received_at, deadline_s, self.settings.stream_total_s) if streaming else None
        headers = {**invocation.upstream_headers(), **target.headers}
        return Call(
            invocation.endpoint, target, "/invocations", invocation.body, headers,
            request_prefix(invocation.body), invocation.received_at + deadline_s, deadline_s, retarget=resolve,
            route=request_routing(target.routing, invocation.body, pin, invocation.target_model,
                           prefix_id=invocation.prefix_aware_id), stream=clock,
        ), session

    def _session(self, invocation: Invocation) -> Session | None:
        """The open session the call names; None for no session or a new one."""
        if invocation.session_id is None or invocation.session_id == NEW_SESSION:
            return None
        return self.sessions.find(invocation.session_id, invocation.endpoint)

    async def _frames(self, answer: Answer,
                      capture: Callable[[bytes], None] | None = None) -> AsyncGenerator[bytes, None]:
        """The answer as PayloadPart events; given `capture`, it gets the whole answer once the stream ended well."""
        whole: list[bytes] = []
        try:
            async for chunk in answer.relay():
                if capture is not None:
                    whole.append(chunk)
                for start in range(0, len(chunk), PART_BYTES):
                    yield eventstream.payload_part(chunk[start : start + PART_BYTES])
            if capture is not None:
                capture(b"".join(whole))
        except StreamEnded as ended:
            log.warning("stream from %s ended early: %s", answer.copy_id, ended)
            if ended.code is None:  # the gateway's own end (its drain): a service failure, not the model's
                yield eventstream.internal_stream_failure(ended.error.message)
            else:
                yield eventstream.model_stream_error(ended.error.message, ended.code)
        except Exception as error:
            log.exception("stream from %s failed", answer.copy_id)
            yield eventstream.internal_stream_failure(as_invocation_error(error).message)


def _session_kind(invocation: Invocation) -> str | None:
    """The toolkit's session request (NEW_SESSION or CLOSE) a call with a SessionId carries, else None."""
    return request_type(invocation.body) if invocation.session_id is not None else None


def _streamed(answer: Response) -> Response:
    """A gateway's whole answer as InvokeEndpointWithResponseStream sends it: one PayloadPart, its content type in
    X-Amzn-SageMaker-Content-Type."""
    headers = {name: value for name, value in answer.headers.items() if name not in ("content-type", "content-length")}
    headers[STREAM_CONTENT_TYPE] = answer.headers.get("content-type", "application/octet-stream")
    return Response(eventstream.payload_part(bytes(answer.body)), headers=headers, media_type=EVENT_STREAM)


def _addressed(target: Target) -> str:
    unit = unit_of(target.component)
    return f"variant {target.variant}" if "/" in unit else f"inference component {unit}"


def _answer_headers(invocation: Invocation, target: Target, response: httpx.Response) -> dict[str, str]:
    headers = {INVOKED_VARIANT: target.variant, REQUEST_ID: invocation.request_id}
    if CUSTOM_ATTRIBUTES in response.headers:
        headers[CUSTOM_ATTRIBUTES] = response.headers[CUSTOM_ATTRIBUTES]
    return headers


def _error(error: Exception, request_id: str) -> Response:
    failure = as_invocation_error(error)
    if failure is not error:
        log.error("invocation %s failed unexpectedly", request_id, exc_info=error)
    return sagemaker_error(failure, request_id)
