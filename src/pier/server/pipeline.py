"""The flavor pipeline: every generation route, whatever its API, runs admit → requests → check → views → answer.

A flavor says what differs (a `Spec`): how its body becomes generate requests (one per choice), the views that
shape the engine's output in its API, and its whole answer. `respond` does the rest the same way for all: it
admits the request's sequences, checks them under the request's resumable progress (server/resumable_answers.py),
keeps what a continuation must repeat, and streams the views' events or completes and answers.

The progress is passed down explicitly: a lone sequence runs under it; several choices run without it (they are
not resumable: server/choices.py).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Sequence
from typing import Any, Protocol, TypeVar

from fastapi import Request
from fastapi.responses import Response

from pier.channel.headers import KV_HELD_WANTED
from pier.channel.prefix import request_prefix
from pier.engine.request import GenerateRequest, GenerationChunk
from pier.engine.validate import CheckedRequest
from pier.errors import GenerationFailed, InvalidRequest
from pier.server import choices, sse
from pier.server.generation import Completion, wait_for_disconnect
from pier.server.resumable_answers import ResumableAnswer, progress_of
from pier.server.served_model import ServedModel
from pier.server.server_state import ServerState

log = logging.getLogger(__name__)


class View(Protocol):
    """How one choice's output is shaped in a flavor's stream (the whole answer is the flavor's `Spec.answer`,
    from its own kind of view)."""

    head: dict[str, Any]  # the fields every event carries; those in continuation.KEPT read the same on every copy

    def opening(self) -> list[dict[str, Any]]: ...

    def chunk(self, chunk: GenerationChunk) -> list[dict[str, Any]]: ...

    def totals(self, views: Sequence[View]) -> list[dict[str, Any]]:
        """The events that end a stream of several choices, after all of theirs (OpenAI's usage of them all)."""
        ...

    def frame(self, event: dict[str, Any]) -> bytes: ...

    def closing(self) -> list[bytes]: ...

    def failure(self, error: BaseException) -> bytes:
        """The event that ends a stream when an error comes after it began (never a silent cut)."""
        ...


V = TypeVar("V", bound=View)


class Spec(Protocol[V]):
    """What one flavor's request decides in the pipeline, with its kind of view."""

    stream: bool  # answer with server-sent events
    sequences: int  # how many sequences the request runs at once (each counts against the copy's concurrency)

    def refuse(self) -> None:
        """Refuse what can be refused before admission (no model needed)."""

    async def requests(self, model: ServedModel) -> list[GenerateRequest]:
        """The body as generate requests on `model`: one per choice."""
        ...

    def views(self, model: ServedModel, checked: Sequence[CheckedRequest]) -> list[V]:
        """One view per choice, for the requests as checked (and so as run); a whole answer that shows only the
        best choice (TGI's best_of) may have one for all."""
        ...

    def answer(self, views: Sequence[V], checked: Sequence[CheckedRequest], done: Sequence[Completion]) -> Response:
        """The whole answer of finished choices."""
        ...


async def respond(spec: Spec[V], http: Request, state: ServerState) -> Response:
    """One generation request, in `spec`'s flavor."""
    spec.refuse()
    model, ticket = state.admit(spec.sequences)
    progress = progress_of(http.scope)
    with ticket:
        checked = choices.check_all(model, await spec.requests(model), progress)
        first = checked[0]  # the gateway routes a request by its first prompt
        if KV_HELD_WANTED in http.headers:  # a KV_AWARE gateway: it reads what this copy holds (server/kv_report.py)
            model.kv_report.record(request_prefix(await http.body()), first.prompt_tokens, first.request.adapter)
        views = spec.views(model, checked)
        if progress is not None:
            progress.keep(views[0].head)  # the same on any copy that continues it
        if spec.stream:
            one = len(checked) == 1
            events = _events(model, checked[0], views[0], progress) if one else _choice_events(
                model, checked, views, progress)
            return sse.EventStream(events, ticket.hand_off())
        if len(checked) == 1:
            done = [await model.complete(checked[0], wait_for_disconnect(http.receive), progress)]
        else:
            done = await choices.complete_all(model, checked, http.receive)
        return spec.answer(views, checked, done)


async def _events(
    model: ServedModel, checked: CheckedRequest, view: View, progress: ResumableAnswer | None,
) -> AsyncGenerator[bytes, None]:
    try:
        for event in view.opening():
            yield view.frame(event)
        async for chunk in model.stream(checked, progress):
            for event in view.chunk(chunk):
                yield view.frame(event)
    except Exception as error:  # after the 200 an error can only be an event; never cut the stream silently
        _log_failed(checked, error)
        yield view.failure(error)
    for tail in view.closing():
        yield tail


async def _choice_events(
    model: ServedModel, checked: Sequence[CheckedRequest], views: Sequence[View], progress: ResumableAnswer | None,
) -> AsyncGenerator[bytes, None]:
    """Several choices in one stream, their chunks interleaved as they come, each with its index; the first
    view's totals at the end for all of them."""
    first = views[0]
    if progress is not None and progress.continuation is not None and progress.continuation.opened:
        # Another copy began this stream and died; its choices cannot be continued (server/choices.py). Say so
        # at the end of what the client has, rather than end the stream silently.
        progress.stopped()
        yield first.failure(GenerationFailed(
            "The model server streaming this answer stopped, and a stream with several choices cannot be continued "
            "on another copy. Send the request again (with a seed, the choices come out the same)."))
        for tail in first.closing():
            yield tail
        return
    try:
        for i, view in enumerate(views):
            for event in view.opening():
                yield first.frame(_indexed(event, i))
        async for i, chunk in choices.stream_all(model, checked):
            for event in views[i].chunk(chunk):
                if event["choices"]:  # each view's own usage chunk is replaced by the totals below
                    yield first.frame(_indexed(event, i))
        for event in first.totals(views):
            yield first.frame(event)
    except Exception as error:  # after the 200 an error can only be an event; never cut the stream silently
        _log_failed(checked[0], error)
        yield first.failure(error)
    for tail in first.closing():
        yield tail


def _indexed(event: dict[str, Any], index: int) -> dict[str, Any]:
    event["choices"][0]["index"] = index
    return event


def _log_failed(checked: CheckedRequest, error: Exception) -> None:
    if not isinstance(error, InvalidRequest):  # the client's mistake is in the error event, not the log
        log.warning("stream %s failed: %s", checked.request.request_id, error)
