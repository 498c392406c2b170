import pytest

from pier.engine.step_cost import FIRST_CAP, MIN_CHUNK, StepCost, decode_line

# (decode rows, prompt tokens, seconds) per step
Steps = list[tuple[int, int, float]]


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([], FIRST_CAP),
        ([(8, 0, 0.06)], FIRST_CAP),  # no mixed step seen yet
        ([(0, 512, 2.0), (8, 32, 0.1)], FIRST_CAP),  # prompt-only steps say nothing; no decode-only step before
        # D = 0.06 s, a 32-token chunk added 0.04 s: 0.00125 s a token, 0.06 / 0.00125 = 48 tokens add one D
        ([(8, 0, 0.06), (8, 32, 0.1)], 48),
        # never below the minimum chunk, however dear prompt tokens are
        ([(8, 0, 0.06), (8, 32, 2.0)], MIN_CHUNK),
        # a mixed step faster than the decode-only median (noise, a stale D): the cap doubles, no more
        ([(8, 0, 0.06), (8, 32, 0.05)], 2 * FIRST_CAP),
    ],
)
def test_prompt_cap(steps: Steps, expected: int) -> None:
    cost = StepCost()
    for rows, tokens, seconds in steps:
        cost.observe(rows, tokens, seconds)
    assert cost.prompt_cap() == expected


@pytest.mark.parametrize(("bound", "expected"), [(2.0, 48), (3.0, 64), (1.5, 24)])
def test_the_bound_scales_the_cap(bound: float, expected: int) -> None:
    cost = StepCost(bound)
    cost.observe(8, 0, 0.06)
    cost.observe(8, 32, 0.1)
    assert cost.prompt_cap() == expected


def test_the_cap_settles_where_a_mixed_step_costs_twice_a_decode_only_one() -> None:
    """A prompt chunk's pass reads the weights again (fixed) and then costs per token: the cap learned from the
    steps it shapes settles where the chunk adds one decode-only step, not where the per-token cost alone says."""
    decode_s, pass_s, token_s = 0.06, 0.02, 0.001

    def mixed(tokens: int) -> float:
        return decode_s + pass_s + token_s * tokens

    cost = StepCost()
    for _ in range(100):
        cost.observe(8, 0, decode_s)
        cap = cost.prompt_cap()
        cost.observe(8, cap, mixed(cap))
    assert cost.prompt_cap() == pytest.approx((decode_s - pass_s) / token_s, abs=2)
    assert mixed(cost.prompt_cap()) <= 2 * decode_s * 1.02


def test_a_slow_step_now_and_then_does_not_move_the_cap() -> None:
    """On a shared host one step in many takes ten times as long: the medians ignore it."""
    cost = StepCost()
    for i in range(30):
        slow = 10.0 if i % 7 == 0 else 1.0
        cost.observe(8, 0, 0.06 * slow)
        cost.observe(8, 32, (0.06 + 0.04) * slow)
    assert cost.prompt_cap() == 48


def test_the_cap_at_most_doubles_a_call() -> None:
    cost = StepCost()
    cost.observe(8, 0, 0.06)
    cost.observe(8, 32, 0.0601)  # prompt tokens nearly free: the cap wants ~19,000 tokens
    assert [cost.prompt_cap() for _ in range(4)] == [64, 128, 256, 512]


@pytest.mark.parametrize(
    ("steps", "rows", "expected"),
    [
        ([], 8, None),
        ([(8, 0.06)], 30, 0.06),  # one row count: nothing to scale by
        ([(8, 0.06), (8, 0.07), (8, 0.5)], 8, 0.07),  # a median, not a mean
        # the line through the row counts' medians: 2 ms a row from 10 ms at 4 rows
        ([(4, 0.010), (8, 0.018), (12, 0.026)], 30, pytest.approx(0.062)),
        ([(4, 0.010), (8, 0.018), (12, 0.026)], 8, pytest.approx(0.018)),
        # never below the cheapest median, never falling with more rows (noise)
        ([(4, 0.010), (8, 0.018)], 1, 0.010),
        ([(4, 0.020), (8, 0.010)], 30, pytest.approx(0.015)),
    ],
)
def test_decode_line(steps: list[tuple[int, float]], rows: int, expected: float | None) -> None:
    assert decode_line(steps, rows) == expected


def test_a_decode_only_step_at_fewer_rows_does_not_make_prompt_tokens_look_dear() -> None:
    """A wave: its first streams decode alone at 2-16 rows, then every step carries prompt tokens beside 30 rows.
    Read at 16 rows, D would charge the prompt tokens the 14 rows' difference and pin the cap at its floor."""
    def decode(rows: int) -> float:
        return 0.0005 + 0.0004 * rows

    cost = StepCost()
    for rows in range(2, 17):
        cost.observe(rows, 0, decode(rows))
    for _ in range(10):
        cap = cost.prompt_cap(30)
        cost.observe(30, cap, decode(30) + 0.0003 * cap)
    assert cost.prompt_cap(30) == round(decode(30) / 0.0003)
