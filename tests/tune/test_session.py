"""What a tune invocation decides before any trial: which candidates the model can take, and the budget."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from pier.tune.runner import Setup
from pier.tune.session import parse_duration, usable
from pier.tune.space import Space


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
