"""The synthetic models' vocabulary: SentencePiece-style pieces (specials, bytes, characters, whole English words
with every prefix, then pronounceable made-up words) that llama.cpp's SPM tokenizer merges into whole words, and the
ChatML template the models carry. The same for every model, whatever its weights' seed."""

from __future__ import annotations

import random
import string
from collections.abc import Sequence
from dataclasses import dataclass

from gguf import TokenType

from pier.synthetic.words import CAPITALIZED_COUNT, WORDS

SPACE = "▁"  # U+2581: SentencePiece writes spaces as this character
UNK, BOS, EOS = "<unk>", "<s>", "</s>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
_SPECIALS: tuple[tuple[str, TokenType], ...] = (
    (UNK, TokenType.UNKNOWN),
    (BOS, TokenType.CONTROL),
    (EOS, TokenType.CONTROL),
    (IM_START, TokenType.CONTROL),
    (IM_END, TokenType.CONTROL),
)
# A few non-ASCII characters with their own token, so UTF-8 tests see both
# single-token multi-byte characters and (for anything else) byte fallback.
_EXTRA_CHARS = "éèêàçñöüäß€£°—’“”中文日本"
_CHARS = SPACE + string.ascii_letters + string.digits + string.punctuation + _EXTRA_CHARS
# The vocabulary does not depend on the weight seed: every model tokenizes alike.
_VOCAB_SEED = 20240601

CHATML_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@dataclass(frozen=True)
class Vocab:
    tokens: list[str]
    scores: list[float]
    types: list[int]
    words: frozenset[str]  # the pieces that are whole words ("▁word")

    def id_of(self, token: str) -> int:
        return self.tokens.index(token)


def build_vocab(n_vocab: int, real: Sequence[str] = WORDS) -> Vocab:
    """SentencePiece-style vocabulary of exactly n_vocab tokens: the `real` words first (common English; `()` for
    a vocabulary of made-up words, in which only the short English words that happen to be pieces are one token).

    Layout: specials, 256 byte tokens, single characters, then word pieces.  llama.cpp's
    SPM tokenizer only merges two adjacent pieces when their concatenation is itself a
    token, so every word "▁word" comes with all of its prefixes "▁w", "▁wo", "▁wor":
    the merges then climb that chain and end on the whole word.
    """
    minimum = fixed_token_count()
    if n_vocab < minimum:
        raise ValueError(f"n_vocab ({n_vocab}) is too small: need at least {minimum} tokens")
    tokens = [text for text, _ in _SPECIALS] + [f"<0x{b:02X}>" for b in range(256)]
    types = [int(kind) for _, kind in _SPECIALS] + [int(TokenType.BYTE)] * 256
    pieces, words = _word_pieces(n_vocab - minimum, real)
    normal = list(_CHARS) + pieces
    tokens += normal
    types += [int(TokenType.NORMAL)] * len(normal)
    # SentencePiece scores are log-probabilities; rank order stands in for them.  When
    # merges compete llama.cpp takes the highest score, but here they never do: the
    # only multi-character pieces are "▁"-prefixed chains, one per word.
    scores = [0.0] * (len(_SPECIALS) + 256) + [-float(rank) for rank in range(len(normal))]
    return Vocab(tokens=tokens, scores=scores, types=types, words=frozenset(words))


def fixed_token_count() -> int:
    return len(_SPECIALS) + 256 + len(_CHARS)


def _word_pieces(budget: int, real: Sequence[str]) -> tuple[list[str], set[str]]:
    """Up to `budget` prefix-closed word pieces (real words first, then pseudo-words),
    and the subset of them that are whole words."""
    pieces: dict[str, None] = {}  # an ordered set
    words: set[str] = set()
    candidates = list(real[:CAPITALIZED_COUNT])
    candidates += [w.capitalize() for w in candidates] + list(real[CAPITALIZED_COUNT:])
    for word in candidates:
        _add_if_fits(pieces, words, SPACE + word, budget)
    rng = random.Random(_VOCAB_SEED)
    misses = 0
    # Later pseudo-words must fit in what is left; give up after many misses and
    # fill the last few slots by extending existing pieces by one letter (always a
    # single new piece, as its prefixes are all there).
    while len(pieces) < budget and misses < 1000:
        fitted = _add_if_fits(pieces, words, SPACE + _pseudo_word(rng), budget)
        misses = 0 if fitted else misses + 1
    for piece in list(pieces):
        for letter in string.ascii_lowercase:
            if len(pieces) >= budget:
                return list(pieces), words
            _add_if_fits(pieces, words, piece + letter, budget)
    return list(pieces), words


def _add_if_fits(pieces: dict[str, None], words: set[str], word_piece: str, budget: int) -> bool:
    missing = [word_piece[:k] for k in range(2, len(word_piece) + 1) if word_piece[:k] not in pieces]
    if word_piece in words or len(pieces) + len(missing) > budget:
        return False
    pieces.update(dict.fromkeys(missing))
    words.add(word_piece)
    return True


_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st", "tr")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou")
_CODAS = ("", "", "", "n", "r", "s", "l")


def _pseudo_word(rng: random.Random) -> str:
    # Pronounceable made-up words (consonant-vowel syllables) to pad the vocabulary.
    syllables = rng.randint(2, 4)
    parts = [rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables)]
    return "".join(parts)
