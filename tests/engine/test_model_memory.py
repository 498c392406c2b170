"""Which prefixes a model's memory lets a sequence go on from: table tests of the pure rules."""

from __future__ import annotations

import pytest

from pier.engine.model_memory import NOTHING, HeldPositions, ModelMemory, first_needed, resumable, saved_first

PLAIN, SWA, RECURRENT = ModelMemory(), ModelMemory(window=512), ModelMemory(recurrent=True)


@pytest.mark.parametrize(("memory", "length", "needed"), [
    (PLAIN, 1129, 0),
    (SWA, 10, 0),  # the whole prefix is inside the window
    (SWA, 512, 1),  # the token at 512 sees 1..512
    (SWA, 657, 146),
    (RECURRENT, 657, 656),  # the state after the last token
    (ModelMemory(window=512, recurrent=True), 657, 656),
])
def test_first_needed(memory: ModelMemory, length: int, needed: int) -> None:
    assert first_needed(memory, length) == needed


@pytest.mark.parametrize(("memory", "held", "length", "ok"), [
    (PLAIN, HeldPositions(0, 1136), 600, True),
    (PLAIN, HeldPositions(0, 500), 600, False),  # llama.cpp holds less than the engine thought
    (PLAIN, NOTHING, 0, True),  # nothing reused: always
    (PLAIN, NOTHING, 5, False),
    # Gemma 3 (window 512): a 1,137-position sequence whose window layers dropped positions below 625
    (SWA, HeldPositions(625, 1136), 1137, True),  # its whole length: the next token needs 626..
    (SWA, HeldPositions(625, 1136), 600, False),  # the 657-token prompt sharing 600: 89.. are gone
    (SWA, HeldPositions(0, 1136), 600, True),  # nothing dropped yet
    (SWA, HeldPositions(89, 1136), 600, True),  # exactly what the token at 600 needs
    (SWA, HeldPositions(90, 1136), 600, False),
    (SWA, HeldPositions(500, 599), 600, False),
    (SWA, HeldPositions(0, 598), 600, False),  # the prefix's last position is gone
    (SWA, NOTHING, 600, False),  # a state restored and cut below its window: llama.cpp skips its check
    (RECURRENT, HeldPositions(1136, 1136), 1137, True),
    (RECURRENT, HeldPositions(1136, 1136), 600, False),  # a recurrent state cannot be cut back
    (RECURRENT, HeldPositions(599, 599), 600, True),
])
def test_resumable(memory: ModelMemory, held: HeldPositions, length: int, ok: bool) -> None:
    assert resumable(memory, held, length) is ok


@pytest.mark.parametrize(("memory", "length", "first"), [
    (PLAIN, 1137, 0),
    (SWA, 1137, 625),  # llama.cpp leaves out what the next token (1137) masks
    (SWA, 300, 0),
    (RECURRENT, 1137, 1136),
    (RECURRENT, 0, 0),
])
def test_saved_first(memory: ModelMemory, length: int, first: int) -> None:
    assert saved_first(memory, length) == first


def test_a_restored_state_resumes_at_its_whole_length_only() -> None:
    """What llama.cpp keeps of a saved Gemma state (the window layers' last 512 positions) lets the next turn go on
    from all of it, and nothing shorter but the last position."""
    saved = HeldPositions(saved_first(SWA, 1137), 1136)
    assert resumable(SWA, saved, 1137) and resumable(SWA, saved, 1136)
    assert not resumable(SWA, saved, 1135) and not resumable(SWA, saved, 657)


def test_plain() -> None:
    assert PLAIN.plain and not SWA.plain and not RECURRENT.plain
