"""Log-probabilities in each API's shape, from the engine's `TokenLogprob`s (engine/logprobs.py says what the
values are). A position without one (a token another copy generated before this one resumed the request) reads
null.

OpenAI chat: `{"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}], "refusal": null}`.
OpenAI completions (legacy): `{"tokens", "token_logprobs", "top_logprobs": [{text: logprob}], "text_offset"}`.
TGI: a token's `logprob`, `top_tokens` per position, prefill tokens with theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pier.engine.logprobs import TokenLogprob

Piece = Callable[[int], bytes]  # a token's bytes (the runner's piece)


def text_of(piece: bytes) -> str:
    return piece.decode("utf-8", "replace")


def chat_logprobs(piece: Piece, tokens: Sequence[int], lps: Sequence[TokenLogprob | None]) -> dict[str, Any]:
    return {"content": [_chat_entry(piece, t, lp) for t, lp in zip(tokens, lps, strict=True)], "refusal": None}


def _chat_entry(piece: Piece, token: int, lp: TokenLogprob | None) -> dict[str, Any]:
    raw = piece(token)
    return {
        "token": text_of(raw), "logprob": lp.logprob if lp else None, "bytes": list(raw),
        "top_logprobs": [{"token": text_of(piece(t)), "logprob": v, "bytes": list(piece(t))}
                         for t, v in (lp.top if lp else ())],
    }


def tgi_chat_logprobs(piece: Piece, tokens: Sequence[int], lps: Sequence[TokenLogprob | None]) -> dict[str, Any]:
    """TGI's ChatCompletionLogprobs: OpenAI's without `bytes`."""
    return {"content": [{
        "token": text_of(piece(t)), "logprob": lp.logprob if lp else None,
        "top_logprobs": [{"token": text_of(piece(o)), "logprob": v} for o, v in (lp.top if lp else ())],
    } for t, lp in zip(tokens, lps, strict=True)]}


class CompletionLogprobs:
    """The legacy completions `logprobs` object, built chunk by chunk: `text_offset` runs on across chunks
    (from the echoed prompt's length, or from 0 with the prompt's own tokens echoed first)."""

    def __init__(self, piece: Piece, offset: int = 0) -> None:
        self.piece = piece
        self.offset = offset

    def add(self, tokens: Sequence[int], lps: Sequence[TokenLogprob | None]) -> dict[str, Any]:
        out: dict[str, Any] = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        for token, lp in zip(tokens, lps, strict=True):
            text = text_of(self.piece(token))
            out["tokens"].append(text)
            out["token_logprobs"].append(lp.logprob if lp else None)
            out["top_logprobs"].append({text_of(self.piece(t)): v for t, v in lp.top} if lp else None)
            out["text_offset"].append(self.offset)
            self.offset += len(text)
        return out


def merged(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Legacy logprobs objects one after the other (the echoed prompt's, then the answer's)."""
    keys = ("tokens", "token_logprobs", "top_logprobs", "text_offset")
    return {k: [v for part in parts for v in part[k]] for k in keys}


def tgi_top(piece: Piece, lp: TokenLogprob | None, special: Callable[[int], bool]) -> list[dict[str, Any]]:
    top = lp.top if lp else ()
    return [{"id": t, "text": text_of(piece(t)), "logprob": v, "special": special(t)} for t, v in top]
