"""The state file of `pier tune`: every finished trial, so a search stopped by its budget, Ctrl-C or a crash
goes on where it was. A state file belongs to one question (model, instance type, SLO, workload): asked
another, it is refused rather than mixed in.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pier.tune.space import Recipe

VERSION = 1


class StateFileError(ValueError):
    """A state file that cannot be used; the message says what to do."""


@dataclass(frozen=True)
class Trial:
    """One short benchmark of one candidate."""

    candidate: Recipe
    rung: int
    goodput: float  # output tok/s when the run met the SLO, else 0
    throughput: float  # output tok/s
    seconds: float  # deploy + benchmark + delete
    misses: tuple[str, ...] = ()
    figures: dict[str, float] = field(default_factory=dict)  # latencies in ms, requests, success rate


@dataclass
class TrialStore:
    path: Path
    question: dict[str, Any]
    trials: list[Trial] = field(default_factory=list)

    @classmethod
    def open(cls, path: Path, question: dict[str, Any]) -> TrialStore:
        """The trials already in `path` for this question, or none when the file does not exist yet."""
        store = cls(path, question)
        if not path.exists():
            return store
        try:
            data = json.loads(path.read_text())
            if data.get("version") != VERSION:
                raise StateFileError(f"{path} was written by another version of pier tune: pass another "
                                     "--state file or delete it.")
            if data["question"] != question:
                raise StateFileError(f"{path} holds trials of another search ({data['question']}): pass another "
                                     "--state file for this one, or delete it to start over.")
            store.trials = [_trial(t) for t in data["trials"]]
        except (OSError, ValueError, KeyError, TypeError) as error:
            if isinstance(error, StateFileError):
                raise
            raise StateFileError(f"{path} is not a pier tune state file ({error}): pass another --state file "
                                 "or delete it.") from None
        return store

    def done(self, candidate: Recipe, rung: int) -> bool:
        return any(t.candidate == candidate and t.rung == rung for t in self.trials)

    def of(self, candidate: Recipe) -> list[Trial]:
        return [t for t in self.trials if t.candidate == candidate]

    def add(self, trial: Trial) -> None:
        """Record a trial and write the file at once (atomically), so a crash loses at most the trial running."""
        self.trials.append(trial)
        data = {"version": VERSION, "question": self.question, "trials": [asdict(t) for t in self.trials]}
        temporary = self.path.with_name(self.path.name + ".tmp")
        temporary.write_text(json.dumps(data, indent=1))
        os.replace(temporary, self.path)


def _trial(raw: dict[str, Any]) -> Trial:
    return Trial(Recipe(**raw["candidate"]), int(raw["rung"]), float(raw["goodput"]), float(raw["throughput"]),
                 float(raw["seconds"]), tuple(raw.get("misses", ())), dict(raw.get("figures", {})))
