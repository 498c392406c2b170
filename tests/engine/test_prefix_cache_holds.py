"""PrefixCache.holds: how much of a prompt the cache holds now, what a copy reports to the gateway."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.engine.request import GenerateRequest, SamplingParams

from .conftest import run

PROMPT = [5 + i % 50 for i in range(100)]


def _core(**config: int | bool) -> EngineCore:
    return EngineCore(FakeRunner(n_ctx=512, n_seq_max=16, n_batch=64),
                      EngineConfig(max_running=4, step_tokens=64, **config))  # type: ignore[arg-type]


def _ran(core: EngineCore, prompt: list[int], adapter: str = "") -> None:
    run(core, GenerateRequest("r", prompt, SamplingParams(temperature=0.0), max_tokens=4, ignore_eos=True,
                              adapter=adapter))


@pytest.mark.parametrize(
    ("asked", "expected"),
    [
        (PROMPT, 100),  # the whole prompt
        (PROMPT[:40], 40),  # a prefix of it
        ([*PROMPT[:40], 1, 2, 3], 40),  # a prompt branching off it
        (tuple(PROMPT), 100),  # any sequence of ids
        ([1, *PROMPT[1:]], 0),  # differs from the first token
        ([], 0),
    ],
)
def test_holds_counts_the_leading_tokens_in_the_kv_cache(asked: Sequence[int], expected: int) -> None:
    core = _core()
    _ran(core, PROMPT)
    assert core.prefix.holds(asked) == expected


def test_an_evicted_prompt_is_no_longer_held() -> None:
    core = _core()
    _ran(core, PROMPT)
    core.prefix.clear()
    assert core.prefix.holds(PROMPT) == 0


def test_a_prompt_saved_to_host_memory_is_still_held() -> None:
    core = _core(host_cache_bytes=1 << 20)
    _ran(core, PROMPT)
    core.prefix.clear()
    assert core.prefix.holds(PROMPT) == 100


def test_nothing_is_held_when_the_cache_is_off_or_under_another_adapter() -> None:
    off = _core(prefix_cache=False)
    _ran(off, PROMPT)
    assert off.prefix.holds(PROMPT) == 0
    on = _core()
    _ran(on, PROMPT)
    assert on.prefix.holds(PROMPT, "other-adapter") == 0


def test_a_chat_saved_after_a_shared_system_prompt_is_held_while_the_system_prompt_is() -> None:
    """Two chats behind one system prompt go to host memory from it on: held in full while the system prompt is
    on the device, and only as far as host memory holds it whole once it has left."""
    core = EngineCore(FakeRunner(n_ctx=512, n_seq_max=16, n_batch=64),
                      EngineConfig(max_running=4, step_tokens=64, prefix_floor_cells=0, host_cache_bytes=1 << 20))
    system = PROMPT[:60]
    chats = [[*system, *[200 + i * 7 + k for k in range(30)]] for i in range(2)]
    out = run(core, *(GenerateRequest(f"c{i}", chat, SamplingParams(temperature=0.0), max_tokens=4,
                                      ignore_eos=True) for i, chat in enumerate(chats)))
    assert core.prefix.host is not None and {e.base for e in core.prefix.host.entries} == {60}
    turn = [*chats[0], *out.tokens("c0")[:3]]
    assert core.prefix.holds(turn) == 93
    core.prefix.clear()  # the system prompt leaves the device, saved whole
    assert core.prefix.holds(turn) == 60
