"""Where prompt tokens come from, so that a prompt of N tokens is N tokens in the model's own tokenizer.

Two kinds of pool:
- token ids, sent as an OpenAI completions prompt (used exactly as given, no BOS added: exact by construction).
  The ids are the NORMAL tokens of a GGUF's vocabulary (`--vocab FILE.gguf`), or the ids of the word list as
  the server's own `/tokenize` returns them (llama-server's and vLLM's shape), when it offers one;
- words that are single tokens: common English words joined by spaces. pier's synthetic models hold them as
  whole-word tokens, and real tokenizers hold most of them as one token with its leading space. Which
  words really are one token is read from the server's `/tokenize` with pieces (llama-server's and pier's)
  when it offers one, and checked through the server's usage (see calibration.py), never assumed. A vocabulary
  with few English words still has pieces that are whole words on their own: the pieces the word list splits
  into (" th" of " the") are tried too.
  A word that opens a message has no space before it (a chat template puts it right after a newline), and
  a SentencePiece vocabulary may spell it in several tokens there; so every text opens with LEAD, a single
  letter, which is one token in every vocabulary, wherever it stands.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from pier.bench.options import BenchError
from pier.synthetic.words import WORDS

Content = str | tuple[int, ...]
LEAD = "a"
NORMAL_TOKEN = 1  # llama.cpp's LLAMA_TOKEN_TYPE_NORMAL: not control, byte, unknown or unused
TOKENIZE_ROUTE = "/tokenize"


@dataclass(frozen=True)
class TokenPool:
    kind: Literal["ids", "words"]
    ids: tuple[int, ...] = field(default=(), repr=False)
    words: tuple[str, ...] = field(default=(), repr=False)
    source: str = ""

    def sample(self, rng: random.Random, count: int) -> Content:
        if self.kind == "ids":
            return tuple(rng.choices(self.ids, k=count))
        if count == 0:
            return ""
        return " ".join([LEAD, *rng.choices(self.words, k=count - 1)])

    def __post_init__(self) -> None:
        if not (self.ids if self.kind == "ids" else self.words):
            raise BenchError(f"No usable prompt tokens were found ({self.source}); use --prompt-format text.")


def candidate_words() -> tuple[str, ...]:
    """The word list, most common first: the words most likely to be single tokens in any vocabulary."""
    return WORDS


def ids_from_gguf(path: Path) -> TokenPool:
    from gguf import GGUFReader

    if not path.is_file():
        raise BenchError(f"--vocab {path} is not a file: give the .gguf the server loaded.")
    try:
        field = GGUFReader(path).fields["tokenizer.ggml.token_type"]
    except (KeyError, ValueError, OSError) as error:
        raise BenchError(f"--vocab {path}: cannot read a GGUF token list ({error}); give the model's .gguf.") from None
    types = [int(field.parts[i][0]) for i in field.data]
    ids = tuple(i for i, kind in enumerate(types) if kind == NORMAL_TOKEN)
    return TokenPool("ids", ids=ids, source=f"normal tokens of {path.name}")


async def ids_from_server(http: httpx.AsyncClient, tokenizer: str, model: str | None,
                          headers: Mapping[str, str] | None = None) -> TokenPool | None:
    """The word list's ids from the server's /tokenize (at `tokenizer`), or None when it has none."""
    tokens = await _tokenize(http, tokenizer, " ".join(candidate_words()), model, headers or {}, pieces=False)
    if tokens is None or not all(isinstance(t, int) for t in tokens):
        return None
    return TokenPool("ids", ids=tuple(dict.fromkeys(tokens)), source=f"the word list through {TOKENIZE_ROUTE}")


async def words_from_server(http: httpx.AsyncClient, tokenizer: str, candidates: Sequence[str], want: int,
                            model: str | None = None, headers: Mapping[str, str] | None = None) -> list[str] | None:
    """Up to `want` words that are one token each after a space, read from the server's /tokenize with pieces
    (two requests at most): the candidates that are, then the whole-word pieces the others split into. None
    when the server's /tokenize gives no pieces."""
    chosen: list[str] = []
    for _ in range(2):
        words = [LEAD, *candidates]
        tokens = await _tokenize(http, tokenizer, " ".join(words), model, headers or {}, pieces=True)
        pieces = _pieces(tokens)
        if pieces is None:
            return chosen or None
        chosen += [w for w in single_token_words(words, pieces) if w not in chosen]
        if len(chosen) >= want:
            break
        candidates = [w for w in piece_words(pieces) if w not in chosen]
    return chosen[:want]


def single_token_words(words: Sequence[str], pieces: Sequence[bytes]) -> list[str]:
    """The words (after the first) that are exactly one token, with the space before them, in the tokenization
    `pieces` of " ".join(words); [] when the pieces do not spell that text (a SentencePiece prefix space
    allowed)."""
    text = " ".join(words).encode()
    joined = b"".join(pieces)
    shift = len(joined) - len(text)
    if shift not in (0, 1) or joined[shift:] != text:
        return []
    spans, at = set(), -shift
    for piece in pieces:
        spans.add((at, at + len(piece)))
        at += len(piece)
    found, start = [], 0
    for index, word in enumerate(words):
        size = len(word.encode())
        if index and (start - 1, start + size) in spans:
            found.append(word)
        start += size + 1
    return found


def piece_words(pieces: Sequence[bytes]) -> list[str]:
    """The pieces that are a space and letters, as words, first seen first."""
    words = (p[1:].decode("ascii", "replace") for p in pieces if p[:1] == b" " and p[1:].isalpha() and p.isascii())
    return list(dict.fromkeys(words))


def _pieces(tokens: list[Any] | None) -> list[bytes] | None:
    """llama-server's {"id", "piece"} tokens as bytes (a piece is text, or its bytes as a list)."""
    if not tokens or not all(isinstance(t, dict) and "piece" in t for t in tokens):
        return None
    pieces = []
    for token in tokens:
        piece = token["piece"]
        if isinstance(piece, str):
            pieces.append(piece.encode())
        elif isinstance(piece, list) and all(isinstance(b, int) and 0 <= b < 256 for b in piece):
            pieces.append(bytes(piece))
        else:
            return None
    return pieces


async def _tokenize(http: httpx.AsyncClient, url: str, text: str, model: str | None, headers: Mapping[str, str],
                    *, pieces: bool) -> list[Any] | None:
    # One body for both shapes: llama-server reads `content`, vLLM reads `prompt`; each ignores the other's.
    body: dict[str, Any] = {"content": text, "prompt": text, "add_special": False, "add_special_tokens": False}
    if pieces:
        body["with_pieces"] = True
    if model:
        body["model"] = model
    try:
        response = await http.post(url, json=body, headers=dict(headers))
        answer = response.json() if response.status_code == httpx.codes.OK else None
    except (httpx.HTTPError, ValueError):
        return None
    tokens = answer.get("tokens") if isinstance(answer, dict) else None
    return tokens if isinstance(tokens, list) else None
