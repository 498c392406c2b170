"""The state file: written after every trial, read back on resume, refused for another search."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pier.tune.space import Recipe
from pier.tune.trials import StateFileError, Trial, TrialStore

QUESTION = {"model": "m.gguf", "slo": ["ttft_p90<2000ms"]}


def test_trials_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    store = TrialStore.open(path, QUESTION)
    trial = Trial(Recipe(2, 1, 8, kv_type="q8_0"), 0, 12.5, 13.0, 4.2, ("ttft p90 2100 ms ≥ 2000 ms",),
                  {"ttft_p90_ms": 2100.0})
    store.add(trial)
    again = TrialStore.open(path, QUESTION)
    assert again.trials == [trial]
    assert again.done(Recipe(2, 1, 8, kv_type="q8_0"), 0) and not again.done(Recipe(2, 1, 8), 0)
    assert not list(tmp_path.glob("*.tmp"))  # written whole, then renamed


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (json.dumps({"version": 1, "question": {"model": "other.gguf"}, "trials": []}), "trials of another search"),
        (json.dumps({"version": 99, "question": QUESTION, "trials": []}), "another version of pier tune"),
        ("{not json", "is not a pier tune state file"),
        (json.dumps({"version": 1, "question": QUESTION, "trials": [{"rung": 0}]}), "is not a pier tune state"),
    ],
)
def test_a_state_file_for_something_else_is_refused(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "state.json"
    path.write_text(content)
    with pytest.raises(StateFileError) as caught:
        TrialStore.open(path, QUESTION)
    assert fragment in str(caught.value) and "--state file" in str(caught.value)
