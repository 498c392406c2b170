"""Drafts: the tokens a sequence will likely write next, read off its own history (n-gram speculation).

Text a model writes often repeats what it has read: an edited file, a quoted passage, a summary's names, JSON keys
from a schema in the prompt. When the last few tokens of a sequence appeared earlier in it, the tokens that
followed them then are a good guess for what follows now. The engine feeds such a guess (a *draft*) with the
sequence's next token in one step and keeps the longest part of it the model agrees with (engine/core.py): every
token kept is a step saved, and a step costs about the same for one token as for a few where the forward pass is
bound by memory, not arithmetic (GPUs, many cores). TGI calls this n-gram speculation (`SPECULATE`); vLLM prompt
lookup decoding.

Pure but for its index: `Drafter` keeps, per sequence, where each n-gram of its history last ended, extended as
tokens come, so a proposal costs a dictionary lookup per n-gram length, not a scan of the history.
"""

from __future__ import annotations

from collections.abc import Sequence

MIN_NGRAM = 2  # a single repeated token predicts too little to pay for a draft
MAX_NGRAM = 4  # longer matches are rarer and seldom better than a 4-gram's
BACKOFF_LIMIT = 16  # most steps a sequence whose drafts keep failing waits before it drafts again


class Drafter:
    """One sequence's drafts: its history's n-grams, and how its last drafts fared."""

    def __init__(self) -> None:
        self._ends: dict[tuple[int, ...], int] = {}  # n-gram -> where its latest occurrence ended (exclusive)
        self._indexed = 0  # n-grams ending before this position are in _ends
        self._wait = 0  # steps to skip before the next draft
        self._backoff = 1

    def propose(self, tokens: Sequence[int], most: int) -> list[int]:
        """Up to `most` tokens that followed the latest earlier occurrence of the history's last n-gram (the
        longest of MAX_NGRAM..MIN_NGRAM that occurred before); none when nothing matches or drafts keep failing."""
        if most <= 0:
            return []
        if self._wait > 0:
            self._wait -= 1
            return []
        self._index(tokens, len(tokens) - 1)  # every n-gram but those ending at the last token
        for n in range(min(MAX_NGRAM, len(tokens) - 1), MIN_NGRAM - 1, -1):
            end = self._ends.get(tuple(tokens[len(tokens) - n:]))
            if end is not None:
                return list(tokens[end : end + most])
        return []

    def judge(self, proposed: int, kept: int) -> None:
        """How a draft fared: `kept` of its `proposed` tokens were what the model wrote. A draft the model
        rejected outright makes the sequence wait before the next one, longer each time (up to BACKOFF_LIMIT
        steps): text that does not repeat itself should not pay for drafts step after step."""
        if kept > 0:
            self._backoff = 1
            return
        self._wait = self._backoff
        self._backoff = min(self._backoff * 2, BACKOFF_LIMIT)

    def _index(self, tokens: Sequence[int], upto: int) -> None:
        """Record the n-grams ending at positions [_indexed, upto) (the ending position exclusive)."""
        for end in range(max(self._indexed, MIN_NGRAM), upto + 1):
            for n in range(MIN_NGRAM, min(MAX_NGRAM, end) + 1):
                self._ends[tuple(tokens[end - n : end])] = end
        self._indexed = max(self._indexed, upto + 1)
