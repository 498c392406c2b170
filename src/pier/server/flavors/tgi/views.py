"""TGI's generate answers: `generated_text` with TGI's `details` (tokens, top tokens, prefill, best_of's
sequences), one event per token when streamed, and the headers TGI's clients read."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pier.channel.headers import SCHEMA_CHECK_HEADER
from pier.dialect import Dialect
from pier.engine.logprobs import TokenLogprob
from pier.engine.request import FinishReason, GenerateRequest, GenerationChunk
from pier.engine.schema_check import SchemaCheck
from pier.server import sse
from pier.server.errors import error_event
from pier.server.flavors.logprob_views import tgi_top
from pier.server.generation import Completion
from pier.server.pipeline import View
from pier.server.served_model import ServedModel


def finish_reason(reason: FinishReason, stop_reason: str | int | None) -> str:
    if reason is FinishReason.LENGTH:
        return "length"
    return "stop_sequence" if isinstance(stop_reason, str) else "eos_token"


@dataclass
class GenerateView:
    """TGI's generate answer: whole (with `details`, best_of's sequences) or one event per token."""

    dialect = Dialect.TGI

    model: ServedModel
    request: GenerateRequest
    seed: int | None
    prefix: str
    details: bool
    prefill: bool
    top_n: int = 0
    index: int = 0
    text: str = ""
    head: dict[str, Any] = field(default_factory=dict)  # nothing that a continuation must repeat

    def _token(self, token: int, text: str, lp: TokenLogprob | None) -> dict[str, Any]:
        return {"id": token, "text": text, "logprob": lp.logprob if lp else None,
                "special": self.model.is_special(token)}

    def _prefill(self, done: Completion) -> list[dict[str, Any]]:
        if not self.prefill:
            return []
        tokens = self.request.prompt
        assert not isinstance(tokens, str), "TGI requests are tokenized by the server"
        lps = done.prompt_logprobs or (None,) * len(tokens)
        return [{"id": t, "text": self.model.token_text(t), "logprob": lp.logprob if lp else None}
                for t, lp in zip(tokens, lps, strict=True)]

    def sequence(self, done: Completion, seed: int | None) -> dict[str, Any]:
        """TGI's Details (a BestOfSequence has the same fields and the generated text)."""
        lps = done.logprobs or (None,) * len(done.token_ids)
        out: dict[str, Any] = {
            "generated_text": self.prefix + done.text,
            "finish_reason": finish_reason(done.finish_reason, done.stop_reason),
            "generated_tokens": len(done.token_ids), "seed": seed, "prefill": self._prefill(done),
            "tokens": [self._token(t, self.model.token_text(t), lp) for t, lp in zip(done.token_ids, lps, strict=True)],
        }
        if self.top_n:
            out["top_tokens"] = [self._top(lp) for lp in lps]
        return out

    def _top(self, lp: TokenLogprob | None) -> list[dict[str, Any]]:
        return tgi_top(self.model.engine.runner.piece, lp, self.model.is_special)

    def response(self, done: Completion, seed: int | None = None) -> dict[str, Any]:
        answer: dict[str, Any] = {"generated_text": self.prefix + done.text}
        if self.details:
            details = self.sequence(done, self.seed if seed is None else seed)
            del details["generated_text"]
            answer["details"] = details
        return answer

    def opening(self) -> list[dict[str, Any]]:
        return []

    def chunk(self, chunk: GenerationChunk) -> list[dict[str, Any]]:
        return list(self._events(chunk))

    def totals(self, views: Sequence[View]) -> list[dict[str, Any]]:
        return []  # a TGI stream has one sequence

    def frame(self, event: dict[str, Any]) -> bytes:
        return sse.event(event, tgi=True)

    def closing(self) -> list[bytes]:
        return []

    def failure(self, error: BaseException) -> bytes:
        return error_event(error, self.dialect)

    def _events(self, chunk: GenerationChunk) -> Iterator[dict[str, Any]]:
        """One event per token; a chunk's text rides on its last token, so the texts add up exactly."""
        self.text += chunk.text
        lps = chunk.logprobs or (None,) * len(chunk.token_ids)
        for i, (token, lp) in enumerate(zip(chunk.token_ids, lps, strict=True)):
            last_of_chunk = i == len(chunk.token_ids) - 1
            self.index += 1
            final = chunk.finished and last_of_chunk
            yield {
                "index": self.index, "token": self._token(token, chunk.text if last_of_chunk else "", lp),
                "top_tokens": self._top(lp) if self.top_n else None,
                "generated_text": self.prefix + self.text if final else None,
                "details": self._stream_details(chunk) if final and self.details else None,
            }

    def _stream_details(self, chunk: GenerationChunk) -> dict[str, Any]:
        assert chunk.finish_reason is not None
        return {
            "finish_reason": finish_reason(chunk.finish_reason, chunk.stop_reason),
            "generated_tokens": self.index, "seed": self.seed, "input_length": chunk.prompt_tokens,
        }


def check_header(check: SchemaCheck | None, done: Completion) -> dict[str, str]:
    """The check after generation of a JSON grammar (engine/schema_check.py), as a header of JSON: TGI's answer
    has no field for it. Absent when the grammar enforced the whole schema and the output is valid."""
    report = check.report(done.text) if check is not None else None
    return {SCHEMA_CHECK_HEADER: json.dumps(report, separators=(",", ":"))} if report is not None else {}


def timing_headers(done: Completion) -> dict[str, str]:
    """TGI's timing headers, which its clients and dashboards read."""
    headers = {"x-compute-type": "cpu", "x-prompt-tokens": str(done.prompt_tokens),
               "x-generated-tokens": str(len(done.token_ids))}
    if done.timings is not None:
        t = done.timings
        per_token = t.predicted_ms / max(t.predicted_n - 1, 1)
        headers |= {
            "x-queue-time": f"{t.queue_ms:.0f}", "x-inference-time": f"{t.prompt_ms + t.predicted_ms:.0f}",
            "x-time-per-token": f"{per_token:.0f}",
        }
    return headers
