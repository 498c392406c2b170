"""The search over trials, with trial results from a deterministic function of the candidate and a clock that
advances by each trial's time: halving, the budget, resuming, and candidates that fail."""

from __future__ import annotations

from pathlib import Path

from pier.tune.space import Recipe, Space
from pier.tune.trials import Trial, TrialStore
from pier.tune.tuner import Search

TRIAL_S = 10.0


class Lab:
    """Runs 'trials': throughput grows with parallel and is best on one big copy; p16 misses the SLO."""

    def __init__(self) -> None:
        self.now = 0.0
        self.ran: list[tuple[str, int]] = []
        self.broken: set[Recipe] = set()

    def clock(self) -> float:
        return self.now

    def trial(self, candidate: Recipe, rung: int) -> Trial:
        self.now += TRIAL_S
        self.ran.append((candidate.label, rung))
        if candidate in self.broken:
            raise RuntimeError("did not deploy")
        throughput = candidate.parallel * (2.0 if candidate.copies == 1 else 1.5) + rung * 0.1
        missed = ("ttft p90 3000 ms ≥ 2000 ms",) if candidate.parallel == 16 else ()
        return Trial(candidate, rung, 0.0 if missed else throughput, throughput, TRIAL_S, missed)


def search(tmp_path: Path, lab: Lab, budget_s: float, space: Space | None = None) -> Search:
    store = TrialStore.open(tmp_path / "state.json", {"q": 1})
    candidates = (space or Space(2, parallel=(4, 8, 16), kv_types=("f16",))).candidates()
    return Search(candidates, store, lab.trial, budget_s, min_repeats=2, clock=lab.clock)


def test_halving_keeps_the_best_until_it_has_its_repeats(tmp_path: Path) -> None:
    lab = Lab()
    standings = search(tmp_path, lab, budget_s=1000).run()
    rung0 = [label for label, rung in lab.ran if rung == 0]
    assert len(rung0) == 6  # every candidate once
    later = [(label, rung) for label, rung in lab.ran if rung > 0]
    assert later[-1][0] == "1x2t p8 b512 f16" and later[-1][1] >= 1  # the winner has 2+ trials
    assert not any("p16" in label for label, _ in later)  # SLO misses never go on
    best = max(standings, key=lambda s: s.goodput)
    assert len(best.goodputs) >= 2


def test_the_budget_stops_before_a_trial_that_would_not_fit_and_a_resume_goes_on(tmp_path: Path) -> None:
    lab = Lab()
    search(tmp_path, lab, budget_s=35).run()
    first = list(lab.ran)
    assert 2 <= len(first) <= 4 and lab.now <= 35 + TRIAL_S
    resumed = Lab()
    search(tmp_path, resumed, budget_s=1000).run()
    assert not set(first) & set(resumed.ran)  # nothing run twice
    assert len(TrialStore.open(tmp_path / "state.json", {"q": 1}).trials) == len(first) + len(resumed.ran)


def test_a_candidate_that_fails_is_reported_and_the_search_goes_on(tmp_path: Path) -> None:
    lab = Lab()
    lab.broken = {Recipe(2, 1, 4)}
    run = search(tmp_path, lab, budget_s=1000)
    standings = run.run()
    assert run.failures == {Recipe(2, 1, 4): "did not deploy"}
    assert len(standings) == 5 and lab.ran.count(("2x1t p4 b512 f16", 0)) == 1


def test_candidates_inside_each_others_noise_stop_at_the_last_rung(tmp_path: Path) -> None:
    lab = Lab()
    space = Space(1, parallel=(4, 8), kv_types=("f16",))  # one split: 1x1t p4 and p8
    run = search(tmp_path, lab, budget_s=10_000, space=space)
    run.max_rungs = 3

    def tied(candidate: Recipe, rung: int) -> Trial:  # the same figures: neither is ever cut
        lab.now += TRIAL_S
        lab.ran.append((candidate.label, rung))
        return Trial(candidate, rung, 10.0, 10.0, TRIAL_S)

    run.run_trial = tied
    run.run()
    assert sorted(lab.ran) == sorted((c.label, r) for c in space.candidates() for r in range(3))
