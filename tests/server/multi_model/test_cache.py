"""The multi-model copy's cache: which models make room (pure), and loads, waits and unloads as calls meet them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from pier.server.multi_model.cache import Held, Loaded, ModelCache, Prepared, evictions

MB = 2**20

EVICTION_CASES = [
    # (name, held least recently used first, need, budget, expected)
    ("room already", [Held("a", 1, False)], 1, 3, []),
    ("least recently used goes", [Held("a", 1, False), Held("b", 1, False)], 1, 2, ["a"]),
    ("as many as it takes", [Held("a", 1, False), Held("b", 1, False), Held("c", 1, False)], 2, 3, ["a", "b"]),
    ("a big one frees room for two", [Held("a", 2, False), Held("b", 1, False)], 2, 3, ["a"]),
    ("busy ones stay", [Held("a", 1, True), Held("b", 1, False)], 1, 2, ["b"]),
    ("busy ones block: wait", [Held("a", 1, True), Held("b", 1, True)], 1, 2, None),
    ("not enough idle room: wait", [Held("a", 2, True), Held("b", 1, False)], 2, 3, None),
    ("too big for the budget: alone", [Held("a", 1, False)], 5, 3, ["a"]),
    ("too big, nothing held", [], 5, 3, []),
]


@pytest.mark.parametrize(("name", "held", "need", "budget", "expected"), EVICTION_CASES,
                         ids=[c[0] for c in EVICTION_CASES])
def test_evictions(name: str, held: list[Held], need: int, budget: int, expected: list[str] | None) -> None:
    assert evictions(held, need, budget) == expected


class Models:
    """Models of 1 MB whose loads take `load_s`, counted; unloads recorded."""

    def __init__(self, load_s: float = 0.0) -> None:
        self.load_s = load_s
        self.loads: list[str] = []
        self.unloads: list[str] = []

    async def prepare(self, name: str) -> Prepared:
        def load() -> Loaded:
            self.loads.append(name)
            return Loaded(app=name, size=MB, unload=lambda: self.unloads.append(name))

        await asyncio.sleep(self.load_s)
        return Prepared(MB, 0.0, load)

    def cache(self, budget_mb: int, keep: bool = True) -> ModelCache:
        async def run(work: Callable[[], object]) -> object:
            return work()

        return ModelCache(self.prepare, run, budget_mb * MB, keep)


@pytest.mark.anyio
async def test_a_model_loads_once_for_calls_that_arrive_together() -> None:
    models = Models(load_s=0.05)
    cache = models.cache(2)

    async def call() -> tuple[object, bool]:
        async with cache.use("a") as use:
            return use.app, use.report.hit

    answers = await asyncio.gather(*(call() for _ in range(5)))
    assert models.loads == ["a"]
    assert {app for app, _ in answers} == {"a"}
    assert not any(hit for _, hit in answers)  # each of them waited for the load
    async with cache.use("a") as use:
        assert use.report.hit and use.report.wait_us == 0 and use.report.loaded == ("a",)


@pytest.mark.anyio
async def test_least_recently_used_is_unloaded_for_a_new_model() -> None:
    models = Models()
    cache = models.cache(2)
    for name in ["a", "b", "a", "c"]:
        async with cache.use(name) as use:
            report = use.report
    assert models.unloads == ["b"]
    assert cache.loaded == ("a", "c") and report.loaded == ("a", "c") and not report.hit


@pytest.mark.anyio
async def test_a_load_waits_for_a_busy_model_instead_of_failing() -> None:
    models = Models()
    cache = models.cache(1)
    release = asyncio.Event()

    async def hold_a() -> None:
        async with cache.use("a"):
            await release.wait()

    holding = asyncio.ensure_future(hold_a())
    await asyncio.sleep(0.01)

    async def call_b() -> object:
        async with cache.use("b") as use:
            return use.app

    waiting = asyncio.ensure_future(call_b())
    await asyncio.sleep(0.05)
    assert not waiting.done() and models.unloads == []  # a is in use: never unloaded under its call
    release.set()
    assert await waiting == "b"
    await holding
    assert models.unloads == ["a"] and cache.loaded == ("b",)


@pytest.mark.anyio
async def test_cache_disabled_unloads_after_each_call() -> None:
    models = Models()
    cache = models.cache(4, keep=False)
    for name in ["a", "a"]:
        async with cache.use(name) as use:
            assert not use.report.hit
    assert models.loads == ["a", "a"] and models.unloads == ["a", "a"] and cache.loaded == ()


@pytest.mark.anyio
async def test_a_model_just_loaded_is_not_unloaded_before_its_call_uses_it() -> None:
    models = Models()
    cache = models.cache(2)
    release = asyncio.Event()

    async def hold(name: str) -> None:
        async with cache.use(name):
            await release.wait()

    held = asyncio.ensure_future(hold("a"))  # a stays busy: the next loads can only unload what is idle
    await asyncio.sleep(0.01)
    calls = [asyncio.ensure_future(hold(name)) for name in ("b", "c")]
    await asyncio.sleep(0.05)
    assert models.unloads == []  # c waits for room; b, loaded for its call, was not taken from it
    release.set()
    await asyncio.gather(held, *calls)
    assert models.loads == ["a", "b", "c"]
