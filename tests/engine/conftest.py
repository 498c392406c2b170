from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.engine.request import GenerateRequest, GenerationChunk


class Collector:
    """Collects every chunk the engine emits, per request."""

    def __init__(self) -> None:
        self.chunks: dict[str, list[GenerationChunk]] = defaultdict(list)

    def __call__(self, chunk: GenerationChunk) -> None:
        self.chunks[chunk.request_id].append(chunk)

    def tokens(self, request_id: str) -> list[int]:
        return [t for c in self.chunks[request_id] for t in c.token_ids]

    def text(self, request_id: str) -> str:
        return "".join(c.text for c in self.chunks[request_id])

    def last(self, request_id: str) -> GenerationChunk:
        return self.chunks[request_id][-1]


def run(core: EngineCore, *requests: GenerateRequest, max_steps: int = 10_000) -> Collector:
    collector = Collector()
    for request in requests:
        core.add(core.prepare(request, collector))
    steps = 0
    while core.has_work:
        core.step()
        steps += 1
        assert steps < max_steps, "engine made no progress"
    return collector


@pytest.fixture
def fake() -> FakeRunner:
    return FakeRunner(n_ctx=512, n_seq_max=16, n_batch=64)


@pytest.fixture
def core(fake: FakeRunner) -> EngineCore:
    return EngineCore(fake, EngineConfig(max_running=4, step_tokens=64))



def grammar_accepts(grammar: str, *texts: str) -> list[bool]:
    """For each text: does llama.cpp's grammar sampler take it whole, byte by byte, and then allow the end? (Each
    byte is tried with `allows` before it is accepted: accepting a refused token would abort the process.)"""
    import llama_cpp

    from pier.engine.grammar import compile_grammar

    runner = FakeRunner()
    sampler = compile_grammar(runner.vocab, grammar)
    try:
        return [_takes(sampler, runner, text) for text in texts]
    finally:
        llama_cpp.llama_sampler_free(sampler)


def _takes(sampler: Any, runner: FakeRunner, text: str) -> bool:
    import llama_cpp

    from pier.engine.grammar import allows

    llama_cpp.llama_sampler_reset(sampler)
    for byte in text.encode():
        token = runner.FIRST_BYTE + byte
        if not allows(sampler, token):
            return False
        llama_cpp.llama_sampler_accept(sampler, token)
    return allows(sampler, runner.EOS)
