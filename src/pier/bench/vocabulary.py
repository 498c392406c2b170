"""Where prompt tokens come from, so that a prompt of N tokens is N tokens in the model's own tokenizer.

Two kinds of pool:
- token ids, sent as an OpenAI completions prompt (used exactly as given, no BOS added: exact by construction).
  The ids are the NORMAL tokens of a GGUF's vocabulary (`--vocab FILE.gguf`), or the ids of the word list as
  the server's own `/tokenize` returns them (llama-server's and vLLM's shape), when it offers one;
- words that are single tokens: common English words joined by spaces. pier's synthetic models hold them as
  whole-word tokens, and real tokenizers hold most of them as one token with its leading space. Which
  words really are one token is checked through the server (see calibration.py), never assumed.
  A word that opens a message has no space before it (a chat template puts it right after a newline), and
  a SentencePiece vocabulary may spell it in several tokens there; so every text opens with LEAD, a single
  letter, which is one token in every vocabulary, wherever it stands.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import httpx

from pier.bench.options import BenchError
from pier.synthetic.words import WORDS

Content = str | tuple[int, ...]
LEAD = "a"
NORMAL_TOKEN = 1  # llama.cpp's LLAMA_TOKEN_TYPE_NORMAL: not control, byte, unknown or unused
_TOKENIZE_ROUTE = "/tokenize"


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


async def ids_from_server(http: httpx.AsyncClient, base_url: str, model: str | None) -> TokenPool | None:
    """The word list's ids from the server's /tokenize, or None when it has none."""
    text = " ".join(candidate_words())
    # One body for both shapes: llama-server reads `content`, vLLM reads `prompt`; each ignores the other's.
    body = {"content": text, "prompt": text, "add_special": False, "add_special_tokens": False}
    if model:
        body["model"] = model
    try:
        response = await http.post(base_url + _TOKENIZE_ROUTE, json=body)
    except httpx.HTTPError:
        return None
    if response.status_code != httpx.codes.OK:
        return None
    try:
        answer = response.json()
    except ValueError:
        return None
    tokens = answer.get("tokens") if isinstance(answer, dict) else None
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        return None
    return TokenPool("ids", ids=tuple(dict.fromkeys(tokens)), source=f"the word list through {_TOKENIZE_ROUTE}")
