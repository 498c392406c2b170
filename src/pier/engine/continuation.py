"""Continuing a request another copy began: its prompt plus the tokens it already generated.

The tokens join the sequence as if this engine had generated them: they are prefilled with the prompt (the
prefix cache may hold part of them), they count toward max_tokens and min_tokens, the sampler replays over
them (penalties count them; a seeded RNG advances as it did, so a seeded request continues its own sequence;
a grammar walks over them, refusing a continuation it could not have produced) and so does the text stream
(held UTF-8 bytes and text that may begin a stop string are held again). What
they produced was already sent, so it comes out once, first, as one chunk marked `replayed`: streams skip it,
whole answers include it.
"""

from __future__ import annotations

from collections.abc import Sequence as Tokens

from pier.engine.request import GenerationChunk
from pier.engine.runner import ModelRunner
from pier.engine.sequence import Sequence
from pier.errors import InvalidRequest


def replay(seq: Sequence, tokens: Tokens[int], runner: ModelRunner) -> GenerationChunk:
    """Append `tokens` to a freshly prepared sequence as generated ones; the chunk they make, marked replayed.
    Raises InvalidRequest if they cannot be a prefix of this request's output (one would have ended it)."""
    request = seq.request
    if len(tokens) >= seq.max_tokens:
        raise InvalidRequest(
            f"A continuation of {len(tokens)} tokens leaves nothing to generate within max_tokens "
            f"({seq.max_tokens}); the request was already complete.", param="continuation")
    n_vocab = runner.info.n_vocab
    texts = []
    for n, token in enumerate(tokens, start=1):
        if not isinstance(token, int) or not 0 <= token < n_vocab:
            raise InvalidRequest(f"Continuation token id {token} is outside the vocabulary [0, {n_vocab}).",
                                 param="continuation")
        may_stop = n > request.min_tokens  # as EngineCore._accept decides it
        ends = token in request.stop_token_ids or (not request.ignore_eos and runner.is_eog(token))
        delta = seq.text.push(request.special_text.get(token) or runner.piece(token), stops=may_stop)
        if may_stop and (ends or delta.stop is not None):
            raise InvalidRequest(
                f"Continuation token {n} ({token}) would have ended the request; a continuation holds only "
                "tokens generated before the request ended.", param="continuation")
        texts.append(delta.text)
    try:
        seq.sampler.replay(tokens)
    except ValueError as refused:  # a grammar's request: the tokens must be ones it could have produced
        raise InvalidRequest(f"The continuation does not follow the request's grammar: {refused}.",
                             param="continuation") from None
    seq.tokens.extend(tokens)
    return GenerationChunk(seq.request_id, "".join(texts), tuple(tokens), prompt_tokens=seq.prompt_len,
                           replayed=True)
