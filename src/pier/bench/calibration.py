"""Choosing prompt tokens the server will count exactly as planned, checked through the server itself.

For text prompts: each candidate word must cost exactly one token in the model's tokenizer. A probe is a real
request with one output token; its `usage.prompt_tokens` minus the prompt's fixed overhead (BOS, chat template)
must equal the number of words sent. The overhead is what a prompt of LEAD alone costs, less LEAD's one token;
candidates are probed after LEAD, where prompts put them. Words go in batches; a batch that miscounts is
halved until the words that are not single tokens are found and dropped. A server that reports no prompt
tokens (TGI) leaves the word list unverified, and the results say so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from pier.bench.client import StreamingClient
from pier.bench.options import BenchError, BenchOptions, PromptFormat
from pier.bench.record import RequestRecord
from pier.bench.vocabulary import LEAD, TokenPool, candidate_words, ids_from_gguf, ids_from_server
from pier.bench.workload import Prompt

POOL_WORDS = 256  # enough distinct words that random prompts share no long prefix by chance
PROBE_BATCH = 64


@dataclass(frozen=True)
class PromptTokens:
    """How prompts are written and what is known of their exactness."""

    pool: TokenPool
    overhead: int | None  # tokens the server adds to a one-message prompt; None when it reports no usage
    verified: bool


async def choose_tokens(
    options: BenchOptions, client: StreamingClient, http: httpx.AsyncClient, base_url: str, *, ids_allowed: bool
) -> PromptTokens:
    """Token ids when the API takes them and a vocabulary is at hand; else verified single-token words."""
    if options.prompt_format is PromptFormat.IDS and not ids_allowed:
        raise BenchError(
            "Token-id prompts only fit the OpenAI completions API (for every target): use "
            "--prompt-format text, or --api openai-completions."
        )
    if options.prompt_format is not PromptFormat.TEXT and ids_allowed:
        pool = await _id_pool(options, http, base_url)
        if pool is not None:
            return PromptTokens(pool, overhead=0, verified=True)
        if options.prompt_format is PromptFormat.IDS:
            raise BenchError(
                "--prompt-format ids needs a vocabulary: pass --vocab MODEL.gguf (the server offers no /tokenize)."
            )
    return await verified_words(client, candidate_words())


async def _id_pool(options: BenchOptions, http: httpx.AsyncClient, base_url: str) -> TokenPool | None:
    if options.vocab is not None:
        return ids_from_gguf(options.vocab)
    return await ids_from_server(http, base_url, options.model)


async def verified_words(client: StreamingClient, candidates: Sequence[str]) -> PromptTokens:
    first = await _probe(client, [])
    if not first.ok or first.input_tokens_source != "usage":
        why = f"the probe failed ({first.error_code})" if not first.ok else "the server reports no prompt tokens"
        return PromptTokens(_words(candidates[:POOL_WORDS], f"unverified words: {why}"), overhead=None, verified=False)
    overhead = first.input_tokens - 1  # LEAD's token
    chosen: list[str] = []
    for start in range(0, len(candidates), PROBE_BATCH):
        chosen += await _single_tokens(client, candidates[start : start + PROBE_BATCH], overhead)
        if len(chosen) >= POOL_WORDS:
            break
    return PromptTokens(
        _words(chosen[:POOL_WORDS], "single-token words, checked against the server's usage"),
        overhead=overhead,
        verified=True,
    )


async def _single_tokens(client: StreamingClient, words: Sequence[str], overhead: int) -> list[str]:
    counted = await _prompt_tokens(client, words)
    if counted is None:
        return []
    if counted - overhead - 1 == len(words):
        return list(words)
    if len(words) == 1:
        return []
    half = len(words) // 2
    return await _single_tokens(client, words[:half], overhead) + await _single_tokens(client, words[half:], overhead)


async def _prompt_tokens(client: StreamingClient, words: Sequence[str]) -> int | None:
    record = await _probe(client, words)
    return record.input_tokens if record.ok and record.input_tokens_source == "usage" else None


async def _probe(client: StreamingClient, words: Sequence[str]) -> RequestRecord:
    text = " ".join([LEAD, *words])
    prompt = Prompt(system=None, history=(), user=text, max_tokens=1, planned_input_tokens=len(words) + 1)
    return await client.send(prompt, RequestRecord(index=-1, conversation=-1, turn=0))


def _words(words: Sequence[str], source: str) -> TokenPool:
    return TokenPool("words", words=tuple(words), source=source)
