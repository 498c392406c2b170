"""Deciding what one engine step computes. Pure: no model, no KV, tested table-driven.

The policy, and its two bounds:

- **Running streams first, and a bounded share of the step for prompts.** Every generating sequence decodes one
  token in every step. While the engine has slots to spare (the third point), the new prompt tokens a step
  carries are capped (`prompt_cap`, set by `engine/step_cost.py` from the steps' measured times) so that they
  add at most (k - 1) times what a decode-only step costs, k = `ITL_BOUND` = 2: a stream's gap between tokens is
  at most twice a decode-only step's, so under mixed load ITL p99 <= 2x ITL p50 (every gap lies between one
  decode-only step and two). The bound is on the forward pass; the cap never goes below `MIN_CHUNK` (8) tokens,
  so prompts always advance, and where 8 prompt tokens cost more than a decode-only step a step beside them costs
  more than k times. With no stream running, prompts get the whole step budget (`budget`, the batch size).
- **Only new prompts are capped.** A prompt is *new* when it was admitted after a running stream began
  generating: it is the load that stream's bound protects it from. A prompt that was already waiting when every
  running stream began (a wave that arrived together: the first prompts finished start streaming beside the rest)
  is computed at the whole step budget: those streams were started ahead of it, and capping it would hold the
  wave's last first tokens back for streams that overtook them. The earliest streams of a wave see the wave's
  remaining steps, as every stream of llama-server's wave waits for the whole wave before its first token.
  (Through HTTP a wave is admitted over a few steps, so this rarely applies there: c = 32's slow last first
  tokens came from a stale step cost, `engine/step_cost.py`.)
- **Unless the engine is saturated.** The cap holds while the engine has slots to spare. Once it is *saturated*
  (requests, running or waiting, filled every slot within the last `SATURATED_STEPS` (32) steps: a closed loop of as
  many users as slots, whose next requests arrive as the last ones end, or a queue), prompts get the whole step
  budget, as with no stream running. There every slot a prompt holds is a row missing from each step, and the streams'
  users wait for those prompts anyway: on the 45M proxy's closed-loop rows (c = 8, c = 32, multi-turn) the cap off
  served 9-19% more output tok/s than the cap, at a lower TTFT and even a lower ITL p50, since fewer steps carried a
  prompt chunk (docs/benchmarks.md, "16 cores", second lease). A running average of the occupancy was tried first and
  dipped below any threshold whenever a closed loop's users were between requests, capping exactly the steps that
  refill the slots (output tok/s 0.76-0.79x llama-server's on c = 8 and multi-turn). At saturation a gap is at most
  one step of `budget` prompt tokens, as in llama-server; under mixed load, with slots to spare, the bound above
  holds.
- **Short prompts first, with aging.** The prompt tokens of a step go to the shortest pending prompts first
  (fewest tokens left), so a short prompt that arrives behind a long one gets its first token after a step or
  two, not after the whole long prompt. A prompt passed over this way is charged: each prompt has a *slack*, the
  prompt tokens younger prompts may still be computed ahead of it; it starts at `AGING` (10%) of the prompt
  tokens first come, first served (FCFS) would compute before its first token (its own and those of the older
  prompts pending when it was admitted: `allowance`), and a younger prompt is given no more tokens ahead of it
  than its slack left. Once its slack is spent it is served in admission order. So before a prompt's first token
  at most 1.1x the prompt tokens FCFS would compute are computed: with every step carrying the same prompt
  tokens (the cap, while streams run), its first token comes at most 10% (plus one step's rounding) later than
  under FCFS. The bound is in prompt tokens: when a short prompt finished first starts a stream where FCFS would
  have run none, the cap applies to steps FCFS would have run at the full budget (the bound holds under load,
  when streams are running anyway; an idle engine has no streams to protect).

FCFS is this plan with every slack 0; pure shortest-first, every slack unbounded (`slack=None`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ITL_BOUND = 2.0  # k: a step with running streams costs at most k times a decode-only step
AGING = 0.1  # a prompt's first token comes after at most (1 + AGING) x the prompt tokens FCFS computes first
SATURATED_STEPS = 32  # the engine counts as saturated this many steps after requests last filled every slot


@dataclass(frozen=True)
class Work:
    """Sequence number `index` (in admission order) feeds its next `n_tokens` pending tokens."""

    index: int
    n_tokens: int


def allowance(fcfs_tokens: int) -> int:
    """A newly admitted prompt's slack: AGING of the prompt tokens FCFS would compute before its first token (its
    own pending tokens and those of the older prompts still pending)."""
    return int(AGING * fcfs_tokens)


def plan(pending: Sequence[int], budget: int, prompt_cap: int | None = None,
         slack: Sequence[int] | None = None, new: Sequence[bool] | None = None,
         saturated: bool = False) -> list[Work]:
    """One step's work. `pending[i]` is how many known tokens sequence i (in admission order) has not yet fed to
    the model (1 for a generating sequence, more while its prompt is being evaluated). `prompt_cap`: the most
    new prompts' tokens in a step beside generating sequences (None: no cap). `slack[i]`: the
    prompt tokens younger prompts may still be given ahead of prompt i (None: unbounded, pure shortest-first).
    `new[i]`: whether prompt i was admitted after a running stream began (None: every prompt is new); the cap
    applies to new prompts only. `saturated`: whether requests fill the engine's slots (then no cap).

    Every generating sequence decodes one token first; then prompts, shortest first, but never more tokens to a
    younger prompt than the slack left of any older unfinished one (the oldest is never held back, so the budget
    is spent whenever there is work for it). Prompts longer than what is left are computed in chunks.
    """
    decode = [Work(i, 1) for i, n in enumerate(pending) if n == 1]
    prompts = [i for i, n in enumerate(pending) if n > 1]
    room = budget - len(decode)
    fresh = {i for i in prompts if new is None or new[i]}
    fresh_room = float(room)  # what new prompts may still take
    if prompt_cap is not None and capped(len(decode), saturated):
        fresh_room = min(room, max(1, prompt_cap))
    if not prompts or room <= 0:
        return decode
    left = {i: pending[i] for i in prompts}
    may = {i: float("inf") if slack is None else slack[i] for i in prompts}
    given = dict.fromkeys(prompts, 0)
    while room > 0 and (unfinished := [i for i in prompts if left[i]]):
        allowed = [i for i in unfinished if fresh_room > 0 or i not in fresh]
        if (chosen := _next(allowed, unfinished, left, may)) is None:
            break
        i, limit = chosen
        n = int(min(left[i], room, limit, fresh_room if i in fresh else room))
        given[i] += n
        left[i] -= n
        room -= n
        if i in fresh:
            fresh_room -= n
        for older in unfinished:
            if older < i:
                may[older] -= n
    return decode + [Work(i, given[i]) for i in prompts if given[i]]


def capped(decode_rows: int, saturated: bool) -> bool:
    """Whether new prompts are capped this step: while streams run and the engine has slots to spare."""
    return decode_rows > 0 and not saturated


def saturation_left(left: int, requests: int, slots: int) -> int:
    """Steps the engine still counts as saturated, one step later: `SATURATED_STEPS` again whenever `requests`
    (running and waiting) fill every slot, one fewer otherwise. A closed loop's users between two requests, or a
    wave's last requests on their way in, leave the slots short for a few steps without ending the saturation."""
    return SATURATED_STEPS if requests >= slots else max(0, left - 1)


def _next(allowed: list[int], unfinished: list[int], left: dict[int, int],
          may: dict[int, float]) -> tuple[int, float] | None:
    """The shortest allowed prompt that no older unfinished prompt's spent slack holds back, and how many tokens
    it may take ahead of them. The oldest unfinished prompt always qualifies (nothing is older), so there is one
    whenever it is allowed; None when every allowed prompt is held back by an older one the cap has stopped."""
    for i in sorted(allowed, key=lambda i: (left[i], i)):
        limit = min((may[o] for o in unfinished if o < i), default=float("inf"))
        if limit > 0:
            return i, limit
    return None


def overtaken(pending: Sequence[int], work: Sequence[Work]) -> list[int]:
    """Per sequence, the prompt tokens this step gave younger prompts while it was left unfinished: what its
    slack is charged. A prompt that finishes in the step is charged nothing (its first token is not delayed)."""
    given = dict.fromkeys(range(len(pending)), 0)
    for w in work:
        given[w.index] = w.n_tokens
    charge = [0] * len(pending)
    younger = 0
    for i in reversed(range(len(pending))):
        if pending[i] > 1 and given[i] < pending[i]:
            charge[i] = younger
        if pending[i] > 1:
            younger += given[i]
    return charge


def new_prompts(pending: Sequence[int], first_tokens: Sequence[float | None], admitted: Sequence[float]) -> list[bool]:
    """Per running sequence, whether it was admitted after a running stream (pending 1) began: the prompts the cap
    applies to. A wave's prompts, waiting when its first ones began streaming, are not."""
    began = min((t for p, t in zip(pending, first_tokens, strict=True) if p == 1 and t is not None),
                default=float("inf"))
    return [at > began for at in admitted]


def holds_new(decode_rows: int, pending: Sequence[int], new: Sequence[bool], saturated: bool) -> bool:
    """Whether the cap holds any of this step's prompts: it caps (`capped`) and a new prompt is being computed."""
    return capped(decode_rows, saturated) and any(n for p, n in zip(pending, new, strict=True) if p > 1)
