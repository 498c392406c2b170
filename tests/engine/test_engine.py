"""The threaded engine and its async API, over the fake runner."""

from __future__ import annotations

import asyncio
import time

import pytest

from pier.engine.engine import Engine
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.engine.request import FinishReason, GenerateRequest, GenerationChunk, SamplingParams
from pier.errors import EngineStopped, InvalidRequest

GREEDY = SamplingParams(temperature=0.0)


@pytest.fixture
def engine() -> Engine:
    engine = Engine(FakeRunner(n_ctx=1024), EngineConfig(max_running=4, step_tokens=64)).start()
    yield engine
    engine.stop()


async def collect(engine: Engine, request: GenerateRequest) -> list[GenerationChunk]:
    return [chunk async for chunk in engine.generate(request)]


def settled(engine: Engine) -> None:
    """Stats are a snapshot taken after each step, a moment after the last chunk went out."""
    deadline = time.monotonic() + 1.0
    while engine.stats().running and time.monotonic() < deadline:
        time.sleep(0.01)


def test_many_concurrent_streams(engine: Engine) -> None:
    async def main() -> list[list[GenerationChunk]]:
        reqs = [GenerateRequest(f"r{i}", [1, 5 + i, 9], GREEDY, max_tokens=10 + i, ignore_eos=True) for i in range(10)]
        return await asyncio.gather(*(collect(engine, r) for r in reqs))

    results = asyncio.run(main())
    for i, chunks in enumerate(results):
        assert sum(len(c.token_ids) for c in chunks) == 10 + i
        assert chunks[-1].finish_reason is FinishReason.LENGTH
        assert all(c.finish_reason is None for c in chunks[:-1])
    settled(engine)
    assert engine.stats().running == 0 and engine.stats().generated_tokens == sum(10 + i for i in range(10))


def test_leaving_the_stream_cancels_and_keeps_the_kv_as_an_idle_prefix(engine: Engine) -> None:
    runner = engine.runner
    assert isinstance(runner, FakeRunner)

    async def main() -> None:
        stream = engine.generate(GenerateRequest("c", [1, 5, 6], GREEDY, max_tokens=500, ignore_eos=True))
        async for chunk in stream:
            if len(chunk.token_ids) and engine.stats().generated_tokens > 3:
                break
        await stream.aclose()

    asyncio.run(main())
    settled(engine)
    stats = engine.stats()
    assert stats.running == 0 and stats.cached_prefixes == 1  # what it computed stays, idle and evictable
    assert runner.used_cells == stats.kv_cells_used > 3


def test_bad_request_raises_in_the_caller(engine: Engine) -> None:
    async def main() -> None:
        await collect(engine, GenerateRequest("bad", [1, 2], SamplingParams(top_p=0)))

    with pytest.raises(InvalidRequest, match="top_p"):
        asyncio.run(main())


def test_stopped_engine_refuses_work() -> None:
    engine = Engine(FakeRunner()).start()
    engine.stop()
    with pytest.raises(EngineStopped):
        engine.submit(GenerateRequest("x", [1, 2]), lambda chunk: None)
