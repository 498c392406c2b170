"""A copy's side of resumable requests (the channel is described in pier/channel/frames.py).

`ResumableAnswers` is an ASGI middleware on the engine app. For a request the gateway marked resumable it
answers `200` with `X-Pier-Frames: 1` at once, then turns what the app sends into frames: the app's status
and headers become an H frame, each body message a D frame carrying the token ids generated since the last
one, and everything from the end of the generation on one L frame (so a copy that dies while finishing leaves
the gateway with the tokens before the last chunk, never with half an ending). While a whole (non-streaming)
answer is being computed, T frames report the tokens as they come, the last chunk's excepted.

A continuation (`X-Pier-Continue`) is given to the engine as the request's `continuation`; the engine's first
chunk is then the replayed one. Views take it like any chunk (so their counts and indexes go on), and what they
write for it is dropped here, as is what a continued stream writes before its first chunk (the client has that
beginning already). The middleware puts the request's `ResumableAnswer` in the ASGI scope (`progress_of`), and the
flavor pipeline (server/pipeline.py) passes it on explicitly: `ServedModel.check` pins a seed for sampled
requests (so a continuation draws the same numbers), `generation.stream` reports each chunk, and the pipeline
keeps the fields of a view's head that must read the same from every copy, like an OpenAI stream's id (`keep`).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping, MutableMapping
from dataclasses import replace
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pier.channel.frames import (
    FRAMES_MEDIA_TYPE,
    Continuation,
    abandon_frame,
    data_frame,
    head_frame,
    state_frame,
    tokens_frame,
)
from pier.channel.headers import CONTINUE, FRAMED, RESUMABLE
from pier.engine.request import GenerateRequest, GenerationChunk
from pier.server.errors import error_response, request_dialect

log = logging.getLogger(__name__)

SEEDS = 2**32 - 1  # llama.cpp's samplers take seeds below this (SamplingParams checks it)

PROGRESS = "pier.progress"  # the ASGI scope key of a resumable request's ResumableAnswer
# The fields of an answer's head that read the same on every copy that continues it: an answer's id and creation
# time, and a Responses stream's next event number (which changes as the stream goes: reported with each frame).
KEPT = ("id", "created", "created_at", "sequence_number")


def progress_of(scope: Mapping[str, Any]) -> ResumableAnswer | None:
    """The resumable request `scope` is, if the gateway asked for one (ResumableAnswers put it there)."""
    progress = scope.get(PROGRESS)
    return progress if isinstance(progress, ResumableAnswer) else None


class ResumableAnswer:
    """One resumable request on this copy: its continuation, and the frames of its answer."""

    def __init__(self, continuation: Continuation | None, send: Send) -> None:
        self.continuation = continuation
        self.state: dict[str, Any] = dict(continuation.state) if continuation else {}
        self._send = send
        self._pending: list[int] = []  # tokens generated and not yet reported
        self._reported_state: dict[str, Any] | None = None
        self._held: list[bytes] = []
        self.head_sent = False
        # What the app writes now was sent by the copy that began the request: a continued stream's beginning,
        # then a view's events for the replayed chunk.
        self._dropping = continuation is not None and continuation.opened
        self.done = False  # the generation ended: what the app still sends goes into the L frame
        self.abandoned = False  # this copy gave the request up (X frame): the app's answer is dropped
        self.ended = False  # the L (or X) frame is out
        self._kept: MutableMapping[str, Any] | None = None  # the head whose KEPT fields are reported

    # -- the request ---------------------------------------------------------------------------------

    def keep(self, fields: MutableMapping[str, Any]) -> None:
        """The fields of an answer's head that must read the same from every copy (an OpenAI stream's id and
        creation time, `KEPT`): a continuation takes them from the copy that began the request; a first copy
        records them."""
        names = [n for n in KEPT if n in fields]
        if self.continuation is not None:
            fields.update({n: self.state[n] for n in names if n in self.state})
        self.state.update({n: fields[n] for n in names})
        self._kept = fields

    def prepare(self, request: GenerateRequest) -> GenerateRequest:
        """The request as this copy runs it: a continuation's tokens and seed, or a pinned seed for a sampled
        request without one (so that another copy could continue its sequence)."""
        sampling = request.sampling
        if self.continuation is not None:
            seed = self.state.get("seed")
            if isinstance(seed, int) and not sampling.greedy:
                sampling = replace(sampling, seed=seed)
            request = replace(request, sampling=sampling, continuation=self.continuation.tokens)
        elif not sampling.greedy and sampling.seed is None:
            request = replace(request, sampling=replace(sampling, seed=random.randrange(SEEDS)))
        self.state["seed"] = request.sampling.seed
        return request

    async def observe(self, chunk: GenerationChunk) -> None:
        """A chunk the engine produced for this request (generation.stream calls it before passing it on)."""
        self._dropping = chunk.replayed
        if chunk.replayed:
            return  # the gateway knows these tokens: it sent them
        self._pending.extend(chunk.token_ids)
        if chunk.finished:
            self.done = True
        elif not self.head_sent and self._pending:  # a whole answer is being computed: report progress
            await self._frames(tokens_frame(self._take()))

    def stopped(self) -> None:
        """The generation is over (finished, failed or left): what follows belongs to the last frame."""
        self.done = True
        self._dropping = False  # an error event written now is new to the client

    async def abandon(self, reason: str) -> None:
        """This copy cannot finish the request (its engine failed or stopped): the gateway may resume it on
        another copy. Whatever the app answers after this is dropped."""
        if self.ended:
            return
        self.abandoned = self.ended = True
        await self._frames(abandon_frame(reason))

    # -- the app's messages --------------------------------------------------------------------------

    async def send(self, message: Message) -> None:
        if self.abandoned or self.ended:
            return
        kind = message["type"]
        if kind == "http.response.start":
            self.head_sent = True
            headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", [])]
            await self._frames(head_frame(message["status"], headers))
        elif kind == "http.response.body":
            body, more = message.get("body", b""), message.get("more_body", False)
            if self._dropping and more:
                return
            if self.done or not more:
                self._held.append(body)
                if not more:
                    await self.finish()
            elif body:
                await self._frames(data_frame(self._take(), body))

    async def finish(self) -> None:
        if not self.ended:
            self.ended = True
            await self._frames(data_frame(self._take(), b"".join(self._held), last=True))
            self._held.clear()

    async def close(self) -> None:
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    def _take(self) -> list[int]:
        tokens, self._pending = self._pending, []
        return tokens

    async def _frames(self, frames: bytes) -> None:
        """Frames, after the state if it changed: the gateway must have it before any token it may resume from."""
        if self._kept is not None:  # a view may move a kept field on as it writes (a Responses event number)
            self.state.update({n: self._kept[n] for n in KEPT if n in self._kept})
        if self.state and self.state != self._reported_state:
            self._reported_state = dict(self.state)
            frames = state_frame(self.state) + frames
        await self._raw(frames)

    async def _raw(self, data: bytes) -> None:
        await self._send({"type": "http.response.body", "body": data, "more_body": True})


class ResumableAnswers:
    """The middleware: frames the answers to requests the gateway marked resumable; others pass untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _header(scope, RESUMABLE) is None:
            await self.app(scope, receive, send)
            return
        continuation = None
        length = _header(scope, CONTINUE)
        if length is not None:
            body = await _whole_body(receive)
            try:
                size = int(length)
                continuation = Continuation.decode(body[:size])
            except ValueError as error:  # the gateway's bug; say so rather than run something else
                bad = ValueError(f"bad continuation: {error}")
                await error_response(bad, request_dialect(scope))(scope, receive, send)
                return
            receive = _replayed(body[size:], receive)
            scope = {**scope, "headers": [(k, v) for k, v in scope["headers"] if k != b"content-length"]
                     + [(b"content-length", str(len(body) - size).encode())]}
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", FRAMES_MEDIA_TYPE.encode()), (FRAMED.lower().encode(), b"1")]})
        progress = ResumableAnswer(continuation, send)
        scope = {**scope, PROGRESS: progress}
        try:
            await self.app(scope, receive, progress.send)
        except Exception as error:  # after our 200 nobody else can answer it: end it in the protocol
            log.exception("resumable request %s failed", scope.get("path"))
            if not progress.head_sent:
                await error_response(error, request_dialect(scope))(scope, receive, progress.send)
        await progress.finish()  # a no-op unless the app ended without a last body message
        await progress.close()


def _header(scope: Scope, name: str) -> str | None:
    wanted = name.lower().encode()
    for key, value in scope["headers"]:
        if key == wanted:
            return bytes(value).decode("latin-1")
    return None


async def _whole_body(receive: Receive) -> bytes:
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(parts)
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts)


def _replayed(body: bytes, receive: Receive) -> Receive:
    """A receive that gives `body` first, then whatever the connection says (a disconnect)."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
