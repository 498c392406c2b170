"""Several choices of one request (OpenAI's `n` and `best_of`, TGI's `best_of`): one engine sequence per choice.

The choices share the prompt through the engine's prefix cache: the first sequence computes it, the others wait
for it (the engine never computes a prefix twice at once) and fork its KV, so the prompt is evaluated once.
Choice i samples with seed + i when the request has a seed. Each choice counts as one request against the copy's
concurrency (the flavor admits `n` turns), so a copy never runs more sequences than it said it takes.

Several choices are not resumable on another copy (the channel carries one token stream): they run without the
request's resumable progress, so a copy that dies under them leaves nothing to continue from: a whole answer is
computed again from the start elsewhere, and a stream the client already reads ends with an error event there.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace

from starlette.types import Receive

from pier.engine.request import GenerateRequest, GenerationChunk
from pier.engine.validate import CheckedRequest
from pier.server.generation import Completion, wait_for_disconnect
from pier.server.resumable_answers import ResumableAnswer
from pier.server.served_model import SEED_MODULUS, ServedModel


def choice_requests(request: GenerateRequest, n: int) -> list[GenerateRequest]:
    """`n` sequences of the same prompt: ids <id>-i, seeds seed + i (each its own random seed without one)."""
    if n == 1:
        return [request]
    out = []
    for i in range(n):
        sampling = request.sampling
        if sampling.seed is not None:
            sampling = replace(sampling, seed=(sampling.seed + i) % SEED_MODULUS)
        out.append(replace(request, request_id=f"{request.request_id}-{i}", sampling=sampling))
    return out


def check_all(
    model: ServedModel, requests: Sequence[GenerateRequest], progress: ResumableAnswer | None = None,
) -> list[CheckedRequest]:
    """The requests checked; only a lone one runs under the request's resumable `progress`."""
    if len(requests) == 1:
        return [model.check(requests[0], progress)]
    return [model.check(r) for r in requests]


async def complete_all(model: ServedModel, checked: Sequence[CheckedRequest], receive: Receive) -> list[Completion]:
    """Every choice to its end, at once; a client that leaves cancels them all."""
    gone = asyncio.ensure_future(wait_for_disconnect(receive))
    try:
        work = [asyncio.create_task(model.complete(c, asyncio.shield(gone))) for c in checked]
        try:
            return list(await asyncio.gather(*work))
        finally:
            for task in work:
                task.cancel()
            await asyncio.gather(*work, return_exceptions=True)
    finally:
        gone.cancel()


_DONE = object()


async def stream_all(model: ServedModel, checked: Sequence[CheckedRequest]) -> AsyncIterator[
        tuple[int, GenerationChunk]]:
    """(choice index, chunk) as the choices produce them; an error in any ends them all."""
    queue: asyncio.Queue[tuple[int, GenerationChunk | None, object]] = asyncio.Queue()

    async def pump(index: int, request: CheckedRequest) -> None:
        try:
            async for chunk in model.stream(request):
                await queue.put((index, chunk, None))
        except Exception as error:  # handed to the consumer, which raises it in the response's stream
            await queue.put((index, None, error))
        finally:
            await queue.put((index, None, _DONE))

    tasks = [asyncio.create_task(pump(i, c)) for i, c in enumerate(checked)]
    try:
        left = len(tasks)
        while left:
            index, chunk, signal = await queue.get()
            if signal is _DONE:
                left -= 1
            elif isinstance(signal, BaseException):
                raise signal
            elif chunk is not None:
                yield index, chunk
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def ranked(done: Sequence[Completion]) -> list[int]:
    """Choice indexes, best first: by the sum of the chosen tokens' log-probabilities (best_of)."""
    def score(i: int) -> float:
        return sum(lp.logprob for lp in done[i].logprobs if lp is not None)
    return sorted(range(len(done)), key=score, reverse=True)

