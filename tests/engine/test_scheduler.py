import random
from dataclasses import dataclass, field

import pytest

from pier.engine.scheduler import (
    AGING,
    SATURATED_STEPS,
    Work,
    allowance,
    capped,
    overtaken,
    plan,
    saturation_left,
)

INF = None  # no cap / unbounded slack


@pytest.mark.parametrize(
    ("pending", "budget", "cap", "slack", "expected"),
    [
        ([], 8, INF, INF, []),
        ([1, 1, 1], 8, INF, INF, [Work(0, 1), Work(1, 1), Work(2, 1)]),
        # decodes go first, then prompts
        ([10, 1, 1], 8, INF, INF, [Work(1, 1), Work(2, 1), Work(0, 6)]),
        ([3, 10], 8, INF, INF, [Work(0, 3), Work(1, 5)]),
        # a long prompt never starves the running sequences
        ([1000, 1, 1, 1], 4, INF, INF, [Work(1, 1), Work(2, 1), Work(3, 1), Work(0, 1)]),
        # shortest first: a short prompt behind a long one is computed first, the long one gets the rest
        ([1000, 50], 512, INF, INF, [Work(0, 462), Work(1, 50)]),
        ([1000, 300, 20, 100], 512, INF, INF, [Work(0, 92), Work(1, 300), Work(2, 20), Work(3, 100)]),
        # beside generating sequences, the prompts share only the cap
        ([1000, 50, 1, 1, 1], 512, 64, INF, [Work(2, 1), Work(3, 1), Work(4, 1), Work(0, 14), Work(1, 50)]),
        ([1000, 300, 20, 1, 1, 1, 1], 512, 64, INF,
         [Work(3, 1), Work(4, 1), Work(5, 1), Work(6, 1), Work(1, 44), Work(2, 20)]),
        ([1000, 50, 1], 512, 64, INF, [Work(2, 1), Work(0, 14), Work(1, 50)]),
        ([100, 1], 512, 8, INF, [Work(1, 1), Work(0, 8)]),
        # ... and the whole budget without them
        ([1000, 300], 512, 64, INF, [Work(0, 212), Work(1, 300)]),
        # aging: a younger prompt gets no more tokens ahead of an older one than the older one's slack
        ([1000, 50], 512, INF, [30, 0], [Work(0, 482), Work(1, 30)]),
        ([1000, 50, 1], 64, 64, [30, 0, 0], [Work(2, 1), Work(0, 33), Work(1, 30)]),
        # slack spent: first come, first served
        ([1000, 50, 1], 64, 64, [0, 0, 0], [Work(2, 1), Work(0, 63)]),
        ([40, 1000, 50, 1], 128, 128, [0, 0, 0, 0], [Work(3, 1), Work(0, 40), Work(1, 87)]),
        # the oldest's slack holds back every younger prompt, a middle one's only those younger than it: the
        # 20-token prompt gets the middle one's slack (10), the middle one what is left of the oldest's
        ([1000, 300, 20], 100, INF, [100, 10, 0], [Work(1, 90), Work(2, 10)]),
        ([1000, 300, 20], 200, INF, [100, 10, 0], [Work(0, 100), Work(1, 90), Work(2, 10)]),
        # prompts that do not fit wait for a later step
        ([1, 1, 9, 5], 4, INF, INF, [Work(0, 1), Work(1, 1), Work(3, 2)]),
        ([1, 1, 1, 9], 3, INF, INF, [Work(0, 1), Work(1, 1), Work(2, 1)]),
    ],
)
def test_plan(pending: list[int], budget: int, cap: int | None, slack: list[int] | None,
              expected: list[Work]) -> None:
    assert plan(pending, budget, cap, slack) == expected


F, T = False, True


@pytest.mark.parametrize(
    ("pending", "cap", "slack", "new", "expected"),
    [
        # a wave: the prompts were waiting when the streams began, so the cap does not hold them back
        ([1, 1, 1, 100, 100], 8, INF, [F, F, F, F, F],
         [Work(0, 1), Work(1, 1), Work(2, 1), Work(3, 100), Work(4, 100)]),
        # ... while a prompt that came after the streams began is capped beside it
        ([1, 1, 1, 100, 100], 8, INF, [F, F, F, F, T],
         [Work(0, 1), Work(1, 1), Work(2, 1), Work(3, 100), Work(4, 8)]),
        ([1, 1, 1, 1, 100, 30, 20], 40, INF, [F, F, F, F, F, T, T],
         [Work(0, 1), Work(1, 1), Work(2, 1), Work(3, 1), Work(4, 100), Work(5, 20), Work(6, 20)]),
        # every prompt new: the cap as before
        ([1, 1, 1, 100, 100], 8, INF, [F, F, F, T, T], [Work(0, 1), Work(1, 1), Work(2, 1), Work(3, 8)]),
        # aging still holds: an old prompt younger than a capped one whose slack is spent waits for it
        ([100, 50, 1, 1, 1], 8, [0, 0, 0, 0, 0], [T, F, F, F, F], [Work(2, 1), Work(3, 1), Work(4, 1), Work(0, 8)]),
    ],
)
def test_the_cap_holds_new_prompts_only(pending: list[int], cap: int, slack: list[int] | None, new: list[bool],
                                        expected: list[Work]) -> None:
    assert plan(pending, 512, cap, slack, new) == expected


@pytest.mark.parametrize(("decode_rows", "saturated", "expected"),
                         [(0, False, False), (0, True, False),  # no stream to protect
                          (3, False, True),  # slots to spare: streams first
                          (3, True, False)])  # saturated: the slots wait for the prompts
def test_capped(decode_rows: int, saturated: bool, expected: bool) -> None:
    assert capped(decode_rows, saturated) is expected


@pytest.mark.parametrize(("left", "requests", "slots", "expected"),
                         [(0, 8, 8, SATURATED_STEPS), (5, 9, 8, SATURATED_STEPS), (0, 1, 1, SATURATED_STEPS),
                          (SATURATED_STEPS, 7, 8, SATURATED_STEPS - 1), (1, 0, 8, 0), (0, 7, 8, 0)])
def test_saturation_left(left: int, requests: int, slots: int, expected: int) -> None:
    assert saturation_left(left, requests, slots) == expected


def test_a_closed_loop_between_requests_stays_saturated_and_a_lull_ends_it() -> None:
    left = saturation_left(0, 8, 8)
    for requests in (7, 0, 3, 6, 8, 7):  # a wave ended together; its users send again over a few steps
        left = saturation_left(left, requests, 8)
        assert left > 0
    for _ in range(SATURATED_STEPS):
        left = saturation_left(left, 5, 8)
    assert left == 0


def test_one_stream_beside_a_long_prompt_keeps_its_bound_while_slots_are_free() -> None:
    assert plan([1500, 1], 512, 32, None, None, saturated=False) == [Work(1, 1), Work(0, 32)]
    assert plan([1500, 1], 512, 32, None, None, saturated=True) == [Work(1, 1), Work(0, 511)]


@pytest.mark.parametrize(
    ("pending", "work", "expected"),
    [
        ([], [], []),
        # an unfinished prompt is charged what younger prompts got; a finished one and decodes nothing
        ([1000, 50], [Work(0, 462), Work(1, 50)], [50, 0]),
        ([40, 1000, 50, 1], [Work(3, 1), Work(0, 40), Work(1, 20), Work(2, 50)], [0, 50, 0, 0]),
        ([1000, 300, 20], [Work(0, 70), Work(1, 10), Work(2, 20)], [30, 20, 0]),
        ([1000, 1, 300], [Work(1, 1), Work(0, 10), Work(2, 10)], [10, 0, 0]),
    ],
)
def test_overtaken(pending: list[int], work: list[Work], expected: list[int]) -> None:
    assert overtaken(pending, work) == expected


@pytest.mark.parametrize(("fcfs_tokens", "expected"), [(0, 0), (9, 0), (100, 10), (1500, 150), (1655, 165)])
def test_allowance(fcfs_tokens: int, expected: int) -> None:
    assert allowance(fcfs_tokens) == expected


def test_every_prompt_advances_and_the_budget_is_spent() -> None:
    """Prompts of random lengths arriving every step, slack as the engine keeps it: the budget is spent whenever
    there is work for it, no prompt is passed over by more than its slack, and one whose slack is spent (with
    every older one's) advances in every step (nothing starves)."""
    rng = random.Random(0)
    pending: list[int] = []
    slack: list[int] = []
    for _ in range(500):
        n = rng.choice([1, 20, 80, 1500])
        slack.append(allowance(sum(p for p in pending if p > 1) + n))
        pending.append(n)
        work = plan(pending, 512, 64, slack)
        decoding = sum(p == 1 for p in pending)
        prompt_tokens = sum(p for p in pending if p > 1)
        room = min(512 - decoding, 64 if decoding else 512)
        assert sum(w.n_tokens for w in work if pending[w.index] > 1) == min(room, prompt_tokens)
        prompts = [i for i, n in enumerate(pending) if n > 1]
        if prompts:
            assert any(w.index == prompts[0] for w in work) or slack[prompts[0]] > 0
        slack = [s - c for s, c in zip(slack, overtaken(pending, work), strict=True)]
        assert min(slack, default=0) >= 0
        for w in work:
            pending[w.index] -= w.n_tokens
        slack = [s for s, n in zip(slack, pending, strict=True) if n > 0]
        pending = [n for n in pending if n > 0]


# ---- the aging bound, simulated --------------------------------------------------------------------------------


@dataclass
class Prompt:
    arrives: float
    length: int
    left: int = 0
    slack: int = 0
    first_token: float | None = None


@dataclass
class CostModel:
    """Seconds a step takes: its decode rows, plus a pass over the prompt tokens (weights read again, then per
    token)."""

    decode_s: float = 0.06
    pass_s: float = 0.02
    token_s: float = 0.002

    def step(self, prompt_tokens: int) -> float:
        return self.decode_s + (self.pass_s + self.token_s * prompt_tokens if prompt_tokens else 0.0)


@dataclass
class Simulation:
    """Prompts arrive at their times; each step admits those arrived, plans the step (`streams` sequences always
    generating beside them, as under load), and advances the clock by the step's cost. With more streams than
    prompts ever wait (32 here), every step is capped: the regime the time bound is stated for (a step budget
    that does not depend on the order; at saturation, when prompts outnumber the streams, the budget is the
    whole step for both orders, and the bound holds in prompt tokens)."""

    aging: bool
    cost: CostModel = field(default_factory=CostModel)
    cap: int = 48
    streams: int = 32

    def run(self, arrivals: list[tuple[float, int]]) -> list[float]:
        prompts = [Prompt(at, n, n) for at, n in arrivals]
        now, admitted, todo = 0.0, [], list(prompts)
        while todo or any(p.left for p in admitted):
            while todo and todo[0].arrives <= now:
                p = todo.pop(0)
                ahead = sum(q.left for q in admitted if q.left)
                p.slack = allowance(ahead + p.left) if self.aging else 0
                admitted.append(p)
            waiting = [p for p in admitted if p.left]
            if not waiting:
                now = todo[0].arrives
                continue
            pending = [1] * self.streams + [p.left for p in waiting]
            slack = [0] * self.streams + [p.slack for p in waiting]
            work = plan(pending, 512, self.cap, slack)
            for p, charge in zip(waiting, overtaken(pending, work)[self.streams:], strict=True):
                p.slack -= charge
            now += self.cost.step(sum(w.n_tokens for w in work if w.index >= self.streams))
            for w in work:
                if w.index >= self.streams:
                    p = waiting[w.index - self.streams]
                    p.left -= w.n_tokens
                    if not p.left:
                        p.first_token = now
        return [p.first_token - p.arrives for p in prompts if p.first_token is not None]


def bursts(seed: int) -> list[tuple[float, int]]:
    """Prompts of 20-300 tokens with long ones (1,500, 15%) among them, in bursts at random times."""
    rng = random.Random(seed)
    arrivals, at = [], 0.0
    for _ in range(rng.randint(5, 30)):
        at += rng.expovariate(rng.choice([0.5, 2.0, 8.0]))
        arrivals.append((at, 1500 if rng.random() < 0.15 else rng.choice([20, 100, 300])))
    return arrivals


@pytest.mark.parametrize("seed", range(40))
def test_no_prompt_waits_more_than_10_percent_longer_than_first_come_first_served(seed: int) -> None:
    """Every prompt's first token comes at most AGING later than under FCFS, plus one step (the chunk rounding)."""
    arrivals = bursts(seed)
    aged, fcfs = Simulation(aging=True).run(arrivals), Simulation(aging=False).run(arrivals)
    one_step = CostModel().step(48)
    for ours, theirs in zip(aged, fcfs, strict=True):
        assert ours <= (1 + AGING) * theirs + one_step


def test_short_prompts_come_sooner_than_first_come_first_served() -> None:
    short, short_fcfs = [], []
    for seed in range(40):
        arrivals = bursts(seed)
        aged, fcfs = Simulation(aging=True).run(arrivals), Simulation(aging=False).run(arrivals)
        short += [t for t, (_, n) in zip(aged, arrivals, strict=True) if n <= 100]
        short_fcfs += [t for t, (_, n) in zip(fcfs, arrivals, strict=True) if n <= 100]
    assert sum(short) < 0.8 * sum(short_fcfs)


def test_a_short_prompt_behind_a_long_one_comes_first_but_the_long_one_at_most_10_percent_later() -> None:
    aged = Simulation(aging=True).run([(0.0, 1500), (0.5, 100)])
    fcfs = Simulation(aging=False).run([(0.0, 1500), (0.5, 100)])
    assert aged[1] < fcfs[1] / 5  # the short prompt no longer waits for the long one
    assert fcfs[0] < aged[0] <= (1 + AGING) * fcfs[0]
