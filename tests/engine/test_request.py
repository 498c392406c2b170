import math

import pytest

from pier.engine.request import SamplingParams, sampling_problems


@pytest.mark.parametrize(
    ("params", "bad"),
    [
        (SamplingParams(), []),
        (SamplingParams(temperature=0.0, top_k=40, top_p=0.9, min_p=0.05, seed=7), []),
        (SamplingParams(temperature=-0.1), ["temperature"]),
        (SamplingParams(temperature=math.nan), ["temperature"]),
        (SamplingParams(top_p=0.0), ["top_p"]),
        (SamplingParams(top_p=1.5), ["top_p"]),
        (SamplingParams(top_k=-1), ["top_k"]),
        (SamplingParams(min_p=2.0), ["min_p"]),
        (SamplingParams(repetition_penalty=0.0), ["repetition_penalty"]),
        (SamplingParams(frequency_penalty=3.0, presence_penalty=-3.0), ["frequency_penalty", "presence_penalty"]),
        (SamplingParams(seed=-1), ["seed"]),
        (SamplingParams(logit_bias={5000: 1.0}), ["logit_bias"]),
        (SamplingParams(logit_bias={3: -math.inf}), []),
    ],
)
def test_sampling_problems(params: SamplingParams, bad: list[str]) -> None:
    problems = sampling_problems(params, n_vocab=1000)
    assert [name for name, _ in problems] == bad
    for name, message in problems:
        assert name in message  # every message names the value it is about


@pytest.mark.parametrize(
    ("params", "greedy"),
    [(SamplingParams(temperature=0.0), True), (SamplingParams(top_k=1), True), (SamplingParams(), False)],
)
def test_greedy(params: SamplingParams, greedy: bool) -> None:
    assert params.greedy is greedy
