"""Running one request on the engine for an HTTP client: under a deadline, cancelled when the client goes.

Streaming routes iterate `stream()`; the others await `complete()`, which also watches the connection so a
client that hangs up stops its generation (and frees its KV) at once instead of when the answer is ready.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass

from starlette.types import Receive

from pier.deadline import Limit, StreamClock
from pier.engine.engine import Engine
from pier.engine.logprobs import TokenLogprob
from pier.engine.request import FinishReason, GenerationChunk, RequestTimings
from pier.engine.validate import CheckedRequest
from pier.errors import ClientGone, EngineStopped, GenerationFailed, PierError
from pier.server.errors import DeadlineExceeded
from pier.server.resumable_answers import ResumableAnswer
from pier.server.server_metrics import GenerationTrace


@dataclass(frozen=True)
class Completion:
    """A finished generation."""

    text: str
    token_ids: tuple[int, ...]
    finish_reason: FinishReason
    stop_reason: str | int | None
    prompt_tokens: int
    timings: RequestTimings | None
    # When asked for: one per token id (None for tokens replayed from another copy), and the prompt's.
    logprobs: tuple[TokenLogprob | None, ...] = ()
    prompt_logprobs: tuple[TokenLogprob | None, ...] | None = None

    @classmethod
    def of(cls, chunks: list[GenerationChunk]) -> Completion:
        last = chunks[-1]
        assert last.finish_reason is not None, "a completion is built from a finished stream"
        return cls(
            text="".join(c.text for c in chunks), token_ids=tuple(t for c in chunks for t in c.token_ids),
            finish_reason=last.finish_reason, stop_reason=last.stop_reason, prompt_tokens=last.prompt_tokens,
            timings=last.timings, logprobs=chunk_logprobs(chunks),
            prompt_logprobs=next((c.prompt_logprobs for c in chunks if c.prompt_logprobs is not None), None),
        )


def chunk_logprobs(chunks: list[GenerationChunk]) -> tuple[TokenLogprob | None, ...]:
    """The chunks' log-probabilities aligned with their token ids, or () when none carries any."""
    if not any(c.logprobs for c in chunks):
        return ()
    return tuple(lp for c in chunks for lp in (c.logprobs or (None,) * len(c.token_ids)))


async def stream(
    engine: Engine, request: CheckedRequest, deadline_s: float, trace: GenerationTrace, *, flowing: bool = False,
    progress: ResumableAnswer | None = None,
) -> AsyncIterator[GenerationChunk]:
    """The request's chunks, up to and including the finished one. Raises DeadlineExceeded when the
    deadline passes and GenerationFailed when the engine fails; leaving early aborts the request. `flowing` (a
    streaming route): the deadline bounds the first chunk and each silence after one, not a stream that flows.
    `progress` (a request the gateway can resume elsewhere) is told of each chunk and of the end."""
    loop = asyncio.get_running_loop()
    clock = StreamClock(loop.time(), deadline_s, None if flowing else deadline_s)
    try:
        chunks = engine.generate(request)
    except EngineStopped as error:
        if progress is not None:
            await progress.abandon(error.message)
        raise
    try:
        while True:
            try:
                async with asyncio.timeout_at(clock.due()):
                    chunk = await anext(chunks)
                clock.moved(loop.time())
            except TimeoutError:
                trace.end("timeout")
                if clock.limit() is Limit.TOTAL:
                    raise DeadlineExceeded(
                        f"The request was still generating after {deadline_s:.1f} s and was stopped so that this "
                        "error reaches you before your client times out. Ask for fewer tokens (max_tokens / "
                        "max_new_tokens), send a shorter prompt, stream the answer, or raise "
                        "SAGEMAKER_MODEL_SERVER_TIMEOUT.") from None
                raise DeadlineExceeded(
                    f"The stream sent nothing for {deadline_s:.1f} s and was stopped. SAGEMAKER_MODEL_SERVER_TIMEOUT "
                    "bounds the wait for the first part and each silence between parts; raise it, or send a shorter "
                    "prompt.") from None
            except PierError:
                trace.end("rejected")
                raise
            trace.chunk(chunk)
            if chunk.finish_reason in (FinishReason.ERROR, FinishReason.ABORT):
                if progress is not None and chunk.finish_reason is FinishReason.ERROR:
                    await progress.abandon(chunk.error or "the engine failed")
                raise GenerationFailed(
                    f"Generation failed: {chunk.error or 'the request was cancelled by the server'}. "
                    "Retry the request; if it keeps failing, check the model server's log."
                )
            if progress is not None:
                await progress.observe(chunk)
            yield chunk
            if chunk.finished:
                return
    finally:
        if progress is not None:
            progress.stopped()
        trace.end("cancelled")  # a no-op when the request already ended another way
        await chunks.aclose()


async def complete(
    engine: Engine, request: CheckedRequest, deadline_s: float, trace: GenerationTrace,
    disconnected: Awaitable[None], progress: ResumableAnswer | None = None,
) -> Completion:
    """Run the request to its end; raises ClientGone (after aborting it) if the client leaves first."""

    async def collect() -> Completion:
        chunks = stream(engine, request, deadline_s, trace, progress=progress)
        return Completion.of([chunk async for chunk in chunks])

    work = asyncio.ensure_future(collect())
    watcher = asyncio.ensure_future(disconnected)
    try:
        done, _ = await asyncio.wait({work, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if work not in done:
            trace.end("disconnected")
    finally:
        watcher.cancel()
        if not work.done():
            work.cancel()
            await asyncio.gather(work, return_exceptions=True)  # let the abort reach the engine now
    if work.cancelled():
        raise ClientGone()
    return work.result()


async def wait_for_disconnect(receive: Receive) -> None:
    """Returns when the client closes the connection. Only call it once the request body has been read."""
    while (await receive())["type"] != "http.disconnect":
        pass
