"""The loaded model as the API flavors use it: its name, tokenizer, chat template, limits and engine."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from typing import Any

from pier.engine.engine import Engine
from pier.engine.request import GenerateRequest, GenerationChunk
from pier.engine.validate import CheckedRequest
from pier.model.chat import ChatTemplate, template_kwargs
from pier.model.tools.families import FORMATS
from pier.model.tools.tool_format import ToolFormat
from pier.server import generation
from pier.server.context_limits import Limits
from pier.server.generation import Completion
from pier.server.kv_report import KvReport
from pier.server.middleware import adapter_requests, request_timeout
from pier.server.resumable_answers import ResumableAnswer
from pier.server.server_metrics import ServerMetrics
from pier.server.settings import ServerSettings

# Clients send 64-bit seeds (TGI's are u64); llama.cpp's samplers take seeds below 2**32 - 1.
SEED_MODULUS = 0xFFFFFFFF

# Past this many characters, tokenizing runs on a worker thread: a 6 MiB prompt takes seconds, and the
# event loop must keep answering /ping within SageMaker's 2 s.
INLINE_TOKENIZE_CHARS = 16_384


class ServedModel:
    def __init__(
        self, engine: Engine, settings: ServerSettings, metrics: ServerMetrics,
        chat: ChatTemplate | None = None,
    ) -> None:
        self.engine = engine
        self.info = engine.info
        self.name = settings.model_name or self.info.name
        self.chat = chat or ChatTemplate.for_model(self.info)
        self.tool_format = ToolFormat.of(self.chat)
        self.tool_markers = self._control_markers()
        self.limits = Limits.resolve(settings, engine.runner.n_ctx)
        self.max_stop_sequences = settings.max_stop_sequences
        self.deadline_s = settings.request_deadline_s
        self.created = int(time.time())
        self._metrics = metrics
        self.kv_report = KvReport(engine.core.prefix.holds)

    @property
    def n_vocab(self) -> int:
        return self.info.n_vocab

    # -- text and tokens ---------------------------------------------------------------------------

    async def tokenize(self, text: str, *, add_bos: bool | None = None) -> list[int]:
        """Text as the model sees it: the model's own BOS rule, and control tokens written in the text
        (like <|im_start|>) parsed as such, as llama.cpp's server and HF tokenizers do."""
        bos = self.info.add_bos if add_bos is None else add_bos
        if len(text) <= INLINE_TOKENIZE_CHARS:
            return self.engine.runner.tokenize(text, add_bos=bos, special=True)
        return await asyncio.to_thread(self.engine.runner.tokenize, text, add_bos=bos, special=True)

    async def render_chat(
        self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None, extra: Mapping[str, Any] | None = None,
    ) -> list[int]:
        """The conversation through the model's chat template, tokenized. BOS is added only when the
        template did not already write it, so the prompt never starts with two."""
        text = self.prompt_text(messages, add_generation_prompt=add_generation_prompt, tools=tools, extra=extra)
        written = bool(self.chat.bos_token) and text.startswith(self.chat.bos_token)
        return await self.tokenize(text, add_bos=self.info.add_bos and not written)

    def prompt_text(
        self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None, extra: Mapping[str, Any] | None = None,
    ) -> str:
        """The conversation through the model's chat template, as text (llama-server's /apply-template)."""
        return self.chat.render(
            messages, add_generation_prompt=add_generation_prompt, tools=tools, **template_kwargs(extra)
        )

    def _control_markers(self) -> dict[int, bytes]:
        """The family's call markers that this vocabulary holds as control tokens (Mistral's [TOOL_CALLS], Llama
        3's <|python_tag|>), which llama.cpp writes as nothing: a request with tools has them written as text."""
        runner = self.engine.runner
        markers = {}
        for marker in FORMATS[self.tool_format.family].markers:
            tokens = runner.tokenize(marker, add_bos=False, special=True)
            if len(tokens) == 1 and runner.piece(tokens[0]) != marker.encode():
                markers[tokens[0]] = marker.encode()
        return markers

    def token_text(self, token: int) -> str:
        return self.engine.runner.piece(token).decode("utf-8", "replace")

    def detokenize(self, tokens: Sequence[int]) -> str:
        return b"".join(self.engine.runner.piece(t) for t in tokens).decode("utf-8", "replace")

    def is_special(self, token: int) -> bool:
        return token == self.info.bos or self.engine.runner.is_eog(token)

    # -- generation --------------------------------------------------------------------------------

    def max_new_tokens(self, n_prompt: int, requested: int | None) -> int:
        """The request's own budget, or all that is left of MAX_TOTAL_TOKENS; raises when it cannot fit."""
        max_new = self.limits.room(n_prompt) if requested is None else requested
        self.limits.check(n_prompt, max_new)
        return max_new

    def check(self, request: GenerateRequest, progress: ResumableAnswer | None = None) -> CheckedRequest:
        """Validate now, so a bad request is answered with a status code rather than inside a 200 stream;
        the engine takes the checked request as it is."""
        if progress is not None:  # resumable: a pinned seed, or a continuation of another copy's work
            request = progress.prepare(request)
        if adapter := adapter_requests.current():  # the LoRA adapter the gateway named
            request = dataclasses.replace(request, adapter=adapter)
        return self.engine.check(request)

    def stream(self, request: CheckedRequest, progress: ResumableAnswer | None = None
               ) -> AsyncIterator[GenerationChunk]:
        deadline_s = request_timeout.deadline_s(self.deadline_s)
        return generation.stream(self.engine, request, deadline_s, self._metrics.trace(), flowing=True,
                                 progress=progress)

    async def complete(
        self, request: CheckedRequest, disconnected: Awaitable[None], progress: ResumableAnswer | None = None,
    ) -> Completion:
        trace = self._metrics.trace()
        deadline_s = request_timeout.deadline_s(self.deadline_s)
        return await generation.complete(self.engine, request, deadline_s, trace, disconnected, progress)
