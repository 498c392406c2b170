"""Per-sequence token sampling on one logits row.

Greedy requests without penalties, biases or a grammar take a numpy argmax (10-20 µs). Everything else runs a
llama.cpp sampler chain over the row, so the sampling maths is llama.cpp's own and the same code path
works for the real runner and the fake one. A grammar (engine/grammar.py) comes first: it rules out the tokens
it does not allow before bias, penalties and truncation see the row.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable, Sequence

import llama_cpp
import numpy as np

from pier.engine import grammar as grammars
from pier.engine.request import SamplingParams

_TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")], align=False)


class GrammarExhausted(Exception):
    """The grammar allows none of the tokens left (min_tokens masks the end of a finished grammar)."""


class TokenSampler:
    """Chooses the next token of one sequence. Not thread-safe: the engine thread owns it. `vocab` is needed
    only for a grammar."""

    def __init__(
        self, params: SamplingParams, n_vocab: int, n_ctx: int, vocab: llama_cpp.llama_vocab_p | None = None,
    ) -> None:
        self.params = params
        self._fast_greedy = (
            params.greedy and not params.has_penalties and not params.logit_bias and params.grammar is None)
        self._chain: llama_cpp.llama_sampler_p | None = None
        # Kept out of the chain so the prompt (remember()) never reaches it; applied first in sample().
        self._grammar: llama_cpp.llama_sampler_p | None = None
        if params.grammar is not None:
            assert vocab is not None, "a grammar needs the runner's vocabulary"
            self._grammar = grammars.compile_grammar(vocab, params.grammar, params.grammar_triggers)
        # Try the unconstrained choice against the grammar first (one token, not the vocabulary) when that is
        # exact: greedy, or sampling without truncation (see sample()). A sampled try costs a second draw when
        # it fails, and burns one when it succeeds, so every token takes two draws (replay() counts on it).
        untruncated = params.top_k == 0 and params.top_p >= 1.0 and params.min_p == 0.0
        self._try_first = self._grammar is not None and (params.greedy or untruncated)
        self._draws = 2 if self._try_first and not params.greedy else 1
        if not self._fast_greedy:
            self._chain = _build_chain(params, n_vocab, n_ctx)
            self._candidates = np.zeros(n_vocab, dtype=_TOKEN_DATA)
            self._ids = np.arange(n_vocab, dtype=np.int32)
            self._array = llama_cpp.llama_token_data_array(
                data=self._candidates.ctypes.data_as(llama_cpp.llama_token_data_p),
                size=n_vocab, selected=-1, sorted=False,
            )

    @property
    def fast_greedy(self) -> bool:
        return self._fast_greedy

    def remember(self, tokens: Iterable[int]) -> None:
        """Feed tokens the penalties should count (the prompt) without sampling."""
        if self._chain is not None and self.params.has_penalties:
            for token in tokens:
                llama_cpp.llama_sampler_accept(self._chain, token)

    def sample(self, logits: np.ndarray) -> int:
        """Pick a token from one row of logits and record it in the sampler's history."""
        if self._chain is None:
            return int(logits.argmax())
        if self._try_first and self._grammar is not None:
            # The grammar on one token instead of the whole vocabulary (~100x cheaper on 262k tokens). Greedy: an
            # allowed argmax is the argmax of the allowed. Sampled from p without truncation: an allowed draw is
            # kept, else one is drawn from p masked to the allowed set A, so P(t) = p(t) + (1 - p(A)) p(t) / p(A)
            # = p(t) / p(A): exactly the masked distribution. (Truncation after masking differs from truncation
            # before it, so truncated requests always mask first.)
            token = self._apply(logits, grammar=False)
            if self._candidates["logit"][self._array.selected] != -np.inf and grammars.allows(self._grammar, token):
                self._advance_dist(self._draws - 1)
                return self._accept(token)
        token = self._apply(logits, grammar=True)
        if self._grammar is not None and self._candidates["logit"][self._array.selected] == -np.inf:
            raise GrammarExhausted(f"the grammar allows none of the tokens left (picked {token})")
        return self._accept(token)

    def _apply(self, logits: np.ndarray, grammar: bool) -> int:
        """Run the chain (after the grammar, if asked) over the row; the token it selects."""
        assert self._chain is not None
        candidates = self._candidates
        candidates["id"] = self._ids
        candidates["logit"] = logits
        candidates["p"] = 0.0
        self._array.size = len(candidates)
        self._array.selected = -1
        self._array.sorted = False
        if grammar and self._grammar is not None:
            llama_cpp.llama_sampler_apply(self._grammar, ctypes.byref(self._array))
        llama_cpp.llama_sampler_apply(self._chain, ctypes.byref(self._array))
        return int(candidates["id"][self._array.selected])

    def _accept(self, token: int) -> int:
        assert self._chain is not None
        if self._grammar is not None:
            llama_cpp.llama_sampler_accept(self._grammar, token)
        llama_cpp.llama_sampler_accept(self._chain, token)
        return token

    @property
    def has_grammar(self) -> bool:
        return self._grammar is not None

    def replay(self, tokens: Sequence[int]) -> None:
        """Bring the sampler to where it would be had it sampled `tokens` itself (a continuation): penalties
        count them, and the seeded RNG advances one draw per token. llama.cpp's dist sampler takes the same
        draws per call whatever the candidates (tests/engine/test_continuation.py pins this), so calls on
        two dummy candidates move it exactly as the real ones did."""
        if self._chain is None or not tokens:
            return
        self._replay_grammar(tokens)
        for token in tokens:
            llama_cpp.llama_sampler_accept(self._chain, token)
        self._advance_dist(self._draws * len(tokens))

    def _advance_dist(self, draws: int) -> None:
        """Move the seeded RNG on by `draws` draws, on two dummy candidates."""
        if self._chain is None or self.params.greedy or draws <= 0:
            return  # no dist sampler in a greedy chain: nothing random to advance
        dist = llama_cpp.llama_sampler_chain_get(self._chain, llama_cpp.llama_sampler_chain_n(self._chain) - 1)
        dummy = np.zeros(2, dtype=_TOKEN_DATA)
        array = llama_cpp.llama_token_data_array(
            data=dummy.ctypes.data_as(llama_cpp.llama_token_data_p), size=2, selected=-1, sorted=False)
        for _ in range(draws):
            dummy["id"] = (0, 1)
            dummy["logit"] = 0.0
            array.size, array.selected, array.sorted = 2, -1, False
            llama_cpp.llama_sampler_apply(dist, ctypes.byref(array))

    def _replay_grammar(self, tokens: Sequence[int]) -> None:
        """Walk the grammar over tokens generated elsewhere; raise ValueError at the first it refuses (accepting
        it would abort llama.cpp)."""
        if self._grammar is None:
            return
        for n, token in enumerate(tokens, start=1):
            if not grammars.allows(self._grammar, token):
                raise ValueError(f"token {n} ({token}) does not follow the grammar")
            llama_cpp.llama_sampler_accept(self._grammar, token)

    def close(self) -> None:
        if self._chain is not None:
            llama_cpp.llama_sampler_free(self._chain)
            self._chain = None
        if self._grammar is not None:
            llama_cpp.llama_sampler_free(self._grammar)
            self._grammar = None

    def __del__(self) -> None:
        self.close()


def _build_chain(p: SamplingParams, n_vocab: int, n_ctx: int) -> llama_cpp.llama_sampler_p:
    """Bias, penalties, then truncation and temperature, as llama.cpp's common sampler orders them."""
    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    for sampler in _samplers(p, n_vocab, n_ctx):
        llama_cpp.llama_sampler_chain_add(chain, sampler)
    return chain


def _samplers(p: SamplingParams, n_vocab: int, n_ctx: int) -> list[llama_cpp.llama_sampler_p]:
    samplers = []
    if p.logit_bias:
        samplers.append(_logit_bias(p, n_vocab))
    if p.has_penalties:
        last_n = n_ctx if p.penalty_last_n == -1 else p.penalty_last_n
        samplers.append(llama_cpp.llama_sampler_init_penalties(
            n_vocab, last_n, p.repetition_penalty, p.frequency_penalty, p.presence_penalty))
    if p.greedy:
        return [*samplers, llama_cpp.llama_sampler_init_greedy()]
    if p.top_k > 0:
        samplers.append(llama_cpp.llama_sampler_init_top_k(min(p.top_k, n_vocab)))
    if p.top_p < 1.0:
        samplers.append(llama_cpp.llama_sampler_init_top_p(p.top_p, 1))
    if p.min_p > 0.0:
        samplers.append(llama_cpp.llama_sampler_init_min_p(p.min_p, 1))
    samplers.append(llama_cpp.llama_sampler_init_temp(p.temperature))
    samplers.append(llama_cpp.llama_sampler_init_dist(_seed(p.seed)))
    return samplers


def _logit_bias(p: SamplingParams, n_vocab: int) -> llama_cpp.llama_sampler_p:
    biases = (llama_cpp.llama_logit_bias * len(p.logit_bias))(
        *(llama_cpp.llama_logit_bias(token=t, bias=b) for t, b in p.logit_bias.items())
    )
    return llama_cpp.llama_sampler_init_logit_bias(n_vocab, len(p.logit_bias), biases)


def _seed(seed: int | None) -> int:
    """No seed means a fresh random one per request (llama.cpp's default seed would do the same)."""
    return seed if seed is not None else int.from_bytes(os.urandom(4), "little") % 0xFFFFFFFF
