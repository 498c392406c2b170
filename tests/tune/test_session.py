"""What a tune invocation decides before any trial: which candidates the model can take, and the budget."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from pier.tune.session import gpus_to_use, parse_duration, usable
from pier.tune.space import Space
from pier.tune.trial import Setup


def test_kv_types_the_model_refuses_are_skipped_with_the_reason(tiny_gguf: Path, small_gguf: Path) -> None:
    space = Space(2, parallel=(4,), kv_types=("f16", "q8_0"))
    out = io.StringIO()
    kept = usable(space.candidates(), Setup(str(tiny_gguf)), Console(file=out, width=300))
    assert {c.kv_type for c in kept} == {"f16"} and len(kept) == 2  # TINY's 16-wide heads: no 32-value blocks
    assert "skipped 1x2t p4 b512 q8_0: a q8_0 KV cache stores blocks of 32 values" in out.getvalue()
    assert len(usable(space.candidates(), Setup(str(small_gguf)), Console(file=io.StringIO()))) == 4
    assert len(usable(space.candidates(), Setup("hf://org/repo/model.gguf"), Console(file=io.StringIO()))) == 4


@pytest.mark.parametrize(("text", "seconds"), [("10m", 600), ("90s", 90), ("1h30m", 5400), ("45", 45), ("2.5m", 150)])
def test_budget_reads(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["ten minutes", "10x", "m", "10m5"])
def test_bad_budget_says_the_form(text: str) -> None:
    with pytest.raises(ValueError, match="write a duration such as 10m"):
        parse_duration(text)


ADVICE = "this host has NVIDIA GPUs but llama-cpp-python was built for CPUs only"


@pytest.mark.parametrize(
    ("instance_gpus", "asked", "advice", "expected"),
    [
        (0, None, None, (0, None)),
        (4, None, None, (4, None)),
        (4, 2, None, (2, None)),
        (4, 0, ADVICE, (0, None)),  # asked for CPU layouts: nothing to say
        (0, None, ADVICE, (0, None)),
        # GPUs a CPU build cannot use: CPU layouts, and the user is told why and how to get a GPU build
        (1, None, ADVICE, (0, f"{ADVICE}. Tuning CPU layouts only (pass --gpus N once llama.cpp has a GPU backend).")),
    ],
)
def test_gpus_to_use(instance_gpus: int, asked: int | None, advice: str | None,
                     expected: tuple[int, str | None]) -> None:
    assert gpus_to_use(instance_gpus, asked, advice) == expected


@pytest.mark.parametrize(("instance_gpus", "asked", "advice", "says"),
                         [(4, 5, None, "has 4 GPU(s)"), (1, 1, ADVICE, "--gpus 0 to tune CPU layouts")])
def test_gpus_that_cannot_be_used_are_refused(instance_gpus: int, asked: int, advice: str | None, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        gpus_to_use(instance_gpus, asked, advice)
