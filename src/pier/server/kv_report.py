"""What this copy's prefix cache holds, as it tells the gateway in `X-Pier-Kv-Held` (pier.channel.kv_held).

The gateway cannot tokenize, so the copy speaks in the gateway's terms: for each recent prompt it keeps the
request's text blocks (pier.channel.prefix, hashed from the same body the gateway hashed) beside the prompt's
token ids, and on each answer reports the blocks of the prompts whose tokens its prefix cache still holds, in the
KV cache or in host memory (`PrefixCache.holds`). A prompt it evicted drops out of the next answer's report.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pier.channel.headers import KV_HELD, KV_HELD_WANTED
from pier.channel.kv_held import MAX_HELD, encode_held

# Prompts remembered. Each answer asks the prefix cache about each of them (a scan of its sequences), so the
# number bounds that cost; a copy's cache rarely holds more distinct conversations than this, and what the header
# can carry (MAX_HELD blocks, most recent first) is the tighter bound anyway.
MAX_PROMPTS = 64

Holds = Callable[[Sequence[int], str], int]  # leading tokens of a prompt the cache holds, under an adapter


@dataclass(frozen=True)
class PromptBlocks:
    blocks: tuple[str, ...]  # its text blocks, shortest prefix first
    tokens: tuple[int, ...]  # its token ids as the engine ran it
    adapter: str = ""


def held_blocks(blocks: Sequence[str], tokens: int, held: int) -> tuple[str, ...]:
    """The leading text blocks of a prompt of `tokens` tokens whose first `held` tokens the cache holds: the same
    share of its blocks (text and tokens run alike; rounded down, so a block is claimed only when covered)."""
    if tokens <= 0 or held <= 0:
        return ()
    return tuple(blocks[: len(blocks) * min(held, tokens) // tokens])


class KvReport:
    """The recent prompts of this copy and what its prefix cache holds of them. Recorded and read on the event
    loop; `holds` runs against the engine's thread (PrefixCache.holds is safe from any thread)."""

    def __init__(self, holds: Holds, *, prompts: int = MAX_PROMPTS, limit: int = MAX_HELD) -> None:
        self._holds = holds
        self._prompts: OrderedDict[str, PromptBlocks] = OrderedDict()  # by its longest block, least recent first
        self._max_prompts = prompts
        self._limit = limit

    def record(self, blocks: Sequence[str], tokens: Sequence[int], adapter: str = "") -> None:
        """A prompt this copy runs now. One shorter than a block has nothing to report."""
        if not blocks:
            return
        key = f"{adapter}\x1f{blocks[-1]}"
        self._prompts.pop(key, None)
        self._prompts[key] = PromptBlocks(tuple(blocks), tuple(tokens), adapter)
        while len(self._prompts) > self._max_prompts:
            self._prompts.popitem(last=False)

    def held(self) -> tuple[str, ...]:
        """The blocks the cache holds now, most recent prompt first, each prompt's shortest prefix first."""
        out: list[str] = []
        for prompt in reversed(list(self._prompts.values())):
            out.extend(held_blocks(prompt.blocks, len(prompt.tokens), self._holds(prompt.tokens, prompt.adapter)))
            if len(out) >= self._limit:
                break
        return tuple(out)

    def header(self) -> str:
        return encode_held(self.held(), limit=self._limit)


class KvHeldHeader:
    """The middleware: an answer to a POST that asks for it (X-Pier-Kv-Held-Wanted: the gateway routes KV_AWARE)
    carries the report as it stands when the answer starts (for a stream or a framed answer, before this
    request's own prompt is computed). Outside ResumableAnswers, so a framed answer carries it on the outer
    response, where the gateway reads it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        wanted = KV_HELD_WANTED.lower().encode()
        if scope["type"] != "http" or scope["method"] != "POST" or all(k != wanted for k, _ in scope["headers"]):
            await self.app(scope, receive, send)
            return
        model = scope["app"].state.pier.model

        async def reporting(message: Message) -> None:
            if message["type"] == "http.response.start" and model is not None:
                message = {**message, "headers": [*message.get("headers", []),
                                                  (KV_HELD.lower().encode(), model.kv_report.header().encode())]}
            await send(message)

        await self.app(scope, receive, reporting)
