"""The search: successive halving over the candidates, within a time budget, resumable from the state file.

Rung 0 tries as many candidates as about half the budget allows (the first trial's time tells how many);
each later rung gives every survivor one more trial, in the reverse order of the one before so no candidate
always runs first after a deploy, until one candidate is left with `min_repeats` trials or the budget is spent.
A trial already in the state file is never run again. The budget is checked before each trial: a trial that
would start past it is left for a resumed search.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pier.tune.halving import Standing, survivors
from pier.tune.space import Recipe
from pier.tune.trials import Trial, TrialStore

Say = Callable[[str], None]


@dataclass
class Search:
    candidates: Sequence[Recipe]
    store: TrialStore
    run_trial: Callable[[Recipe, int], Trial]
    budget_s: float
    min_repeats: int = 2
    eta: int = 2
    max_rungs: int = 8  # candidates that stay inside each other's noise stop here, not at the budget
    say: Say = lambda _: None
    clock: Callable[[], float] = time.monotonic
    failures: dict[Recipe, str] = field(default_factory=dict)

    def run(self) -> list[Standing]:
        """Every candidate tried, with its trials so far; the search stops at the budget."""
        deadline = self.clock() + self.budget_s
        alive = list(self.candidates[: self._first_rung_size(deadline)])
        rung = 0
        while alive:
            order = alive if rung % 2 == 0 else alive[::-1]
            for candidate in order:
                if not self._trial(candidate, rung, deadline):
                    return self.standings()
            alive = [c for c in alive if c not in self.failures]
            if (len(alive) <= 1 and rung + 1 >= self.min_repeats) or rung + 1 >= self.max_rungs:
                break
            kept = set(survivors([self._standing(c) for c in alive], self.eta))
            alive = [c for c in alive if c.key in kept]
            rung += 1
        return self.standings()

    def _first_rung_size(self, deadline: float) -> int:
        """Candidates for rung 0: all those already tried, plus what half the time left would run."""
        tried = sum(1 for c in self.candidates if self.store.done(c, 0))
        left = len(self.candidates) - tried
        seconds = self._trial_seconds()
        if not left or seconds is None:
            return len(self.candidates) if seconds is None else tried
        affordable = int(max(0.0, deadline - self.clock()) / 2 / seconds)
        return tried + max(2, min(left, affordable))

    def _trial_seconds(self) -> float | None:
        times = [t.seconds for t in self.store.trials]
        return statistics.median(times) if times else None

    def _trial(self, candidate: Recipe, rung: int, deadline: float) -> bool:
        """Run one trial unless it is done; False when the budget has no room for it."""
        if self.store.done(candidate, rung) or candidate in self.failures:
            return True
        expected = self._trial_seconds() or 0.0
        if self.clock() + expected > deadline:
            self.say(f"budget spent: {candidate.label} (rung {rung}) and later trials are left for a resumed run")
            return False
        try:
            trial = self.run_trial(candidate, rung)
        except Exception as error:  # a candidate that cannot run is reported, not fatal
            self.failures[candidate] = str(error)
            self.say(f"{candidate.label}: {error}")
            return True
        self.store.add(trial)
        verdict = "meets the SLO" if not trial.misses else "misses: " + "; ".join(trial.misses)
        self.say(f"rung {rung} {candidate.label}: {trial.throughput:.1f} tok/s, {verdict} ({trial.seconds:.0f} s)")
        return True

    def _standing(self, candidate: Recipe) -> Standing:
        trials = self.store.of(candidate)
        return Standing(candidate.key, tuple(t.goodput for t in trials), tuple(t.throughput for t in trials))

    def standings(self) -> list[Standing]:
        return [self._standing(c) for c in self.candidates if self.store.of(c)]
