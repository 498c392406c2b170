"""Checks a request against the model before any work is done. Every message names the value, the limit
and the fix, in the words the OpenAI and TGI APIs use."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pier.engine.grammar import check_grammar
from pier.engine.request import GenerateRequest
from pier.engine.runner import ModelRunner
from pier.errors import ContextLengthExceeded, InvalidRequest


@dataclass(frozen=True)
class CheckedRequest:
    """A request that passed `check_request`, with its prompt tokenized: the engine takes it as is, so a
    server that checked a request before answering never checks (or tokenizes) it twice."""

    request: GenerateRequest
    prompt_tokens: list[int]
    max_tokens: int


def checked(request: GenerateRequest | CheckedRequest, runner: ModelRunner) -> CheckedRequest:
    return request if isinstance(request, CheckedRequest) else check_request(request, runner)


def check_request(request: GenerateRequest, runner: ModelRunner) -> CheckedRequest:
    n_ctx, n_vocab = runner.n_ctx, runner.info.n_vocab
    request.sampling.validate(n_vocab)
    prompt = _prompt_tokens(request, runner)
    if len(prompt) >= n_ctx:
        raise ContextLengthExceeded(
            f"This model's maximum context length is {n_ctx} tokens. However, your prompt is {len(prompt)} "
            f"tokens, leaving no room to generate. Shorten the prompt to at most {n_ctx - 1} tokens.",
            prompt_tokens=len(prompt), max_tokens=request.max_tokens or 0, limit=n_ctx,
        )
    max_tokens = _max_tokens(request, len(prompt), n_ctx)
    if not 0 <= request.min_tokens <= max_tokens:
        raise InvalidRequest(
            f"min_tokens must be between 0 and max_tokens ({max_tokens}); got {request.min_tokens}.",
            param="min_tokens",
        )
    _check_stops(request, n_vocab)
    for name in ("logprobs", "prompt_logprobs"):
        k = getattr(request, name)
        if k is not None and not 0 <= k <= n_vocab:
            raise InvalidRequest(f"{name} must be between 0 and the vocabulary size ({n_vocab}); got {k}.",
                                 param=name)
    if request.sampling.grammar is not None:
        check_grammar(runner.vocab, request.sampling.grammar)
    return CheckedRequest(request, prompt, max_tokens)


def _prompt_tokens(request: GenerateRequest, runner: ModelRunner) -> list[int]:
    if isinstance(request.prompt, str):
        if not request.prompt:
            raise InvalidRequest("The prompt is empty: send at least one character of text.", param="prompt")
        add_bos = request.add_bos and runner.info.add_bos  # some models (e.g. Qwen) never take a BOS
        return runner.tokenize(request.prompt, add_bos=add_bos, special=request.parse_special)
    tokens = list(request.prompt)
    if not tokens:
        raise InvalidRequest("The prompt is empty: send at least one token id.", param="prompt")
    bad = _first_out_of_range(tokens, runner.info.n_vocab)
    if bad is not None:
        raise InvalidRequest(
            f"Prompt token id {bad} is outside the vocabulary: ids must be in [0, {runner.info.n_vocab}).",
            param="prompt",
        )
    return tokens


def _max_tokens(request: GenerateRequest, n_prompt: int, n_ctx: int) -> int:
    room = n_ctx - n_prompt
    if request.max_tokens is None:
        return room
    if request.max_tokens < 1:
        raise InvalidRequest(f"max_tokens must be at least 1; got {request.max_tokens}.", param="max_tokens")
    if request.max_tokens > room:
        raise ContextLengthExceeded.requested(n_ctx, n_prompt, request.max_tokens)
    return request.max_tokens


def _check_stops(request: GenerateRequest, n_vocab: int) -> None:
    if any(not isinstance(s, str) for s in request.stop):
        raise InvalidRequest("stop must be a string or a list of strings.", param="stop")
    bad = _first_out_of_range(list(request.stop_token_ids), n_vocab)
    if bad is not None:
        raise InvalidRequest(f"stop token id {bad} is outside the vocabulary [0, {n_vocab}).", param="stop")


def _first_out_of_range(tokens: Sequence[int], n_vocab: int) -> int | None:
    return next((t for t in tokens if not isinstance(t, int) or not 0 <= t < n_vocab), None)
