from __future__ import annotations

import random
from itertools import islice

import pytest

from pier.bench.conversations import Conversations, Exchange, positive_length
from pier.bench.options import BenchOptions
from pier.bench.vocabulary import TokenPool

WORDS = TokenPool("words", words=("alpha", "beta", "gamma", "delta"), source="test")
IDS = TokenPool("ids", ids=(11, 12, 13), source="test")


def workload(pool: TokenPool = WORDS, seed: str = "s", **fields: object) -> Conversations:
    return Conversations(BenchOptions(target="http://h", **fields), pool, seed)  # type: ignore[arg-type]


def test_exact_lengths_in_words_and_ids() -> None:
    for pool, length in ((WORDS, lambda c: len(c.split())), (IDS, len)):
        conversation = next(workload(pool, input_len=37, output_len=5).conversations())
        (round_,) = conversation.rounds
        assert length(round_.user) == round_.input_tokens == 37
        assert round_.max_tokens == 5
        assert conversation.system is None


def test_same_seed_same_prompts_other_seed_other_prompts() -> None:
    def users(seed: str) -> list[object]:
        return [c.rounds[0].user for c in islice(workload(seed=seed).conversations(), 5)]

    assert users("a") == users("a")
    assert users("a") != users("b")


def test_shared_prefix_is_the_same_system_prompt_everywhere() -> None:
    conversations = list(islice(workload(workload="shared-prefix", shared_prefix=50).conversations(), 4))
    systems = {c.system for c in conversations}
    assert len(systems) == 1
    (system,) = systems
    assert isinstance(system, str) and len(system.split()) == 50
    assert len({c.rounds[0].user for c in conversations}) == 4


def test_multi_turn_prompts_carry_the_history() -> None:
    conversation = next(workload(workload="multi-turn", turns=3, input_len=4).conversations())
    assert len(conversation.rounds) == 3
    history = (Exchange(conversation.rounds[0].user, " reply one"),)
    prompt = conversation.prompt(1, history)
    assert prompt.history == history
    assert prompt.user == conversation.rounds[1].user
    assert prompt.planned_input_tokens == 8  # both user turns; the reply's tokens are the server's to count


def test_distributed_lengths_are_positive_and_spread() -> None:
    lengths = [
        t.max_tokens for c in islice(workload(output_len=3, output_len_stddev=5).conversations(), 200) for t in c.rounds
    ]
    assert min(lengths) >= 1
    assert len(set(lengths)) > 3


@pytest.mark.parametrize(("mean", "stddev"), [(5, 0.0), (1, 10.0), (100, 1.0)])
def test_positive_length(mean: int, stddev: float) -> None:
    rng = random.Random(0)
    values = [positive_length(rng, mean, stddev) for _ in range(100)]
    assert all(v >= 1 for v in values)
    if stddev == 0:
        assert set(values) == {mean}
