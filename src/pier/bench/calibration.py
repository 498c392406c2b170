"""Choosing prompt tokens the server will count exactly as planned, checked through the server itself.

For text prompts: each candidate word must cost exactly one token in the model's tokenizer. A probe is a real
request with one output token; its `usage.prompt_tokens` minus the prompt's fixed overhead (BOS, chat template)
must equal the number of words sent. The overhead is what a prompt of LEAD alone costs, less LEAD's one token;
candidates are probed after LEAD, where prompts put them. Words go in batches; a batch that miscounts is
halved until the words that are not single tokens are found and dropped. A server that reports no prompt
tokens (TGI) leaves the word list unverified, and the results say so.

A server with llama-server's /tokenize (a pier copy, an endpoint on a pier gateway, llama-server) names its
single-token words itself (vocabulary.words_from_server): one probe then checks them against its usage, and the
benchmark starts at once. Without one, probing stops at PROBE_REQUESTS or PROBE_SECONDS, whichever comes first:
a vocabulary with few English words would otherwise cost thousands of probes. What was done is the pool's
`source`, printed before the runs and kept in the results.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import httpx

from pier.bench.conversations import Prompt
from pier.bench.options import BenchError, BenchOptions, PromptFormat
from pier.bench.request_record import RequestRecord
from pier.bench.streaming_client import StreamingClient
from pier.bench.vocabulary import (
    LEAD,
    TOKENIZE_ROUTE,
    TokenPool,
    candidate_words,
    ids_from_gguf,
    ids_from_server,
    words_from_server,
)

POOL_WORDS = 256  # enough distinct words that random prompts share no long prefix by chance
PROBE_BATCH = 64
PROBE_REQUESTS = 200  # the most probes calibration sends without a tokenizer...
PROBE_SECONDS = 10.0  # ...and the longest it probes

ServerWords = Callable[[int], Awaitable[list[str] | None]]  # up to N single-token words from the server's tokenizer


@dataclass(frozen=True)
class PromptTokens:
    """How prompts are written and what is known of their exactness."""

    pool: TokenPool
    overhead: int | None  # tokens the server adds to a one-message prompt; None when it reports no usage
    verified: bool


async def choose_tokens(
    options: BenchOptions, client: StreamingClient, http: httpx.AsyncClient, tokenizer: str, *, ids_allowed: bool
) -> PromptTokens:
    """Token ids when the API takes them and a vocabulary is at hand; else verified single-token words.
    `tokenizer`: the URL of the server's /tokenize, if it has one."""
    if options.prompt_format is PromptFormat.IDS and not ids_allowed:
        raise BenchError(
            "Token-id prompts only fit the OpenAI completions API (for every target): use "
            "--prompt-format text, or --api openai-completions."
        )
    headers = {k: v for k, v in client.headers().items() if k.lower() != "accept"}  # its key and component
    if options.prompt_format is not PromptFormat.TEXT and ids_allowed:
        pool = (ids_from_gguf(options.vocab) if options.vocab is not None
                else await ids_from_server(http, tokenizer, options.model, headers))
        if pool is not None:
            return PromptTokens(pool, overhead=0, verified=True)
        if options.prompt_format is PromptFormat.IDS:
            raise BenchError(
                f"--prompt-format ids needs a vocabulary: pass --vocab MODEL.gguf (the server offers no "
                f"{TOKENIZE_ROUTE})."
            )

    def server_words(want: int) -> Awaitable[list[str] | None]:
        return words_from_server(http, tokenizer, candidate_words(), want, options.model, headers)

    return await verified_words(client, candidate_words(), server_words)


@dataclass
class ProbeBudget:
    """How many probes calibration may still send, and until when."""

    requests: int = PROBE_REQUESTS
    seconds: float = PROBE_SECONDS
    used: int = 0
    exhausted: bool = False
    started: float = field(default_factory=time.monotonic)

    def take(self) -> bool:
        """One more probe, if the budget has room for it."""
        if self.used >= self.requests or time.monotonic() - self.started >= self.seconds:
            self.exhausted = True
            return False
        self.used += 1
        return True

    def describe(self) -> str:
        took = f"{self.used} probe{'s' if self.used != 1 else ''} in {time.monotonic() - self.started:.1f} s"
        if self.exhausted:
            took += f", stopped at the probing budget ({self.requests} probes or {self.seconds:g} s)"
        return took


async def verified_words(client: StreamingClient, candidates: Sequence[str], server_words: ServerWords | None = None,
                         budget: ProbeBudget | None = None) -> PromptTokens:
    budget = budget or ProbeBudget()
    first = await _probe(client, [])
    if not first.ok or first.input_tokens_source != "usage":
        why = f"the probe failed ({first.error_code})" if not first.ok else "the server reports no prompt tokens"
        return PromptTokens(_words(candidates[:POOL_WORDS], f"unverified words: {why}"), overhead=None, verified=False)
    overhead = first.input_tokens - 1  # LEAD's token
    if server_words is not None and (told := await server_words(POOL_WORDS)):
        check = told[:PROBE_BATCH]
        if await _prompt_tokens(client, check, budget) == overhead + 1 + len(check):
            source = (f"{len(told)} single-token words from the server's {TOKENIZE_ROUTE}, checked against its "
                      f"usage ({budget.describe()})")
            return PromptTokens(_words(told, source), overhead=overhead, verified=True)
    chosen: list[str] = []
    for start in range(0, len(candidates), PROBE_BATCH):
        chosen += await _single_tokens(client, candidates[start : start + PROBE_BATCH], overhead, budget)
        if len(chosen) >= POOL_WORDS or budget.exhausted:
            break
    if not chosen:
        source = (f"unverified words: no single-token word found ({budget.describe()}); input lengths are "
                  "approximate")
        return PromptTokens(_words(candidates[:POOL_WORDS], source), overhead=overhead, verified=False)
    source = (f"{min(len(chosen), POOL_WORDS)} single-token words, checked against the server's usage "
              f"({budget.describe()})")
    return PromptTokens(_words(chosen[:POOL_WORDS], source), overhead=overhead, verified=True)


async def _single_tokens(client: StreamingClient, words: Sequence[str], overhead: int,
                         budget: ProbeBudget) -> list[str]:
    """The words that are one token each, by halving a batch that miscounts; words left unprobed when the budget
    runs out are dropped."""
    counted = await _prompt_tokens(client, words, budget)
    if counted is None:
        return []
    if counted - overhead - 1 == len(words):
        return list(words)
    if len(words) == 1:
        return []
    half = len(words) // 2
    return (await _single_tokens(client, words[:half], overhead, budget)
            + await _single_tokens(client, words[half:], overhead, budget))


async def _prompt_tokens(client: StreamingClient, words: Sequence[str], budget: ProbeBudget) -> int | None:
    if not budget.take():
        return None
    record = await _probe(client, words)
    return record.input_tokens if record.ok and record.input_tokens_source == "usage" else None


async def _probe(client: StreamingClient, words: Sequence[str]) -> RequestRecord:
    text = " ".join([LEAD, *words])
    prompt = Prompt(system=None, history=(), user=text, max_tokens=1, planned_input_tokens=len(words) + 1)
    return await client.send(prompt, RequestRecord(index=-1, conversation=-1, round=0))


def _words(words: Sequence[str], source: str) -> TokenPool:
    return TokenPool("words", words=tuple(words), source=source)
