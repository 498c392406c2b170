"""LoRA adapters in the engine: many adapters and the base in one batch, each answer llama.cpp's own with that
adapter, and no prefix reused across adapters."""

from __future__ import annotations

from pathlib import Path

import llama_cpp
import pytest

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.llama import LlamaRunner
from pier.engine.request import GenerateRequest, SamplingParams
from pier.errors import InvalidRequest
from pier.lora_file import adapter_problem
from pier.synthetic.builder import TINY, build_gguf
from pier.synthetic.lora import build_lora_gguf

from .conftest import run

GREEDY = SamplingParams(temperature=0.0)
N_ADAPTERS = 8
PROMPT = "the quick brown fox jumps over the lazy dog and then the cat sat on the mat while it rained"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    folder = tmp_path_factory.mktemp("lora")
    model = build_gguf(folder / "tiny-f32.gguf", TINY, quant="F32")
    return model, [build_lora_gguf(folder / f"lora-{i}.gguf", TINY, seed=i) for i in range(N_ADAPTERS)]


def reference(model: Path, adapter: Path | None, n: int) -> str:
    """llama-cpp-python's own greedy answer, one sequence, the adapter given as lora_path."""
    llm = llama_cpp.Llama(str(model), lora_path=str(adapter) if adapter else None, n_ctx=512, n_threads=2,
                          flash_attn=True, verbose=False)
    try:
        out = llm(PROMPT, max_tokens=n, temperature=0.0, top_k=1, repeat_penalty=1.0)
        return str(out["choices"][0]["text"])  # type: ignore[index]
    finally:
        llm.close()


def test_adapters_and_the_base_batched_together_answer_as_llama_cpp_does_with_each(
    files: tuple[Path, list[Path]],
) -> None:
    model, adapters = files
    runner = LlamaRunner(model, n_ctx=2048, n_seq_max=64, n_batch=512, n_threads=2)
    try:
        for i, path in enumerate(adapters):
            info = runner.adapters.load(f"a{i}", path)
            # rank 4 over q (64->64), v (64->32), up (64->128), down (128->64) in 2 layers, F32: A and B
            assert info.nbytes == 2 * 4 * 4 * ((64 + 64) + (64 + 32) + (64 + 128) + (128 + 64))
        core = EngineCore(runner, EngineConfig(max_running=16, step_tokens=512))
        names = ["", *(f"a{i}" for i in range(N_ADAPTERS))]
        for round_ in range(2):  # the second round finds every prompt cached: only under its own adapter
            reqs = [GenerateRequest(f"r{round_}-{name}", PROMPT, GREEDY, max_tokens=12, ignore_eos=True, adapter=name)
                    for name in names]
            out = run(core, *reqs)
            texts = {r.adapter: out.text(r.request_id) for r in reqs}
            if round_:
                assert core.stats().cached_prompt_tokens > 0
            expected = {name: reference(model, adapters[int(name[1:])] if name else None, 12) for name in names}
            assert texts == expected
        assert len(set(texts.values())) == len(names), "every adapter answers differently, and not as the base"
    finally:
        runner.close()


def test_a_request_for_an_adapter_not_loaded_is_refused_before_any_work(files: tuple[Path, list[Path]]) -> None:
    runner = LlamaRunner(files[0], n_ctx=256, n_seq_max=4, n_threads=2)
    try:
        core = EngineCore(runner)
        with pytest.raises(InvalidRequest, match="not loaded"):
            core.prepare(GenerateRequest("r", PROMPT, GREEDY, adapter="nope"), lambda _: None)
    finally:
        runner.close()


@pytest.mark.parametrize(
    ("kind", "problem"),
    [("missing", "No file"), ("text", "not a GGUF file"), ("model", "not a LoRA adapter"), ("lora", None),
     ("nan", "holds NaN or infinite weights"), ("inf", "holds NaN or infinite weights"),
     ("huge", "holds weights up to 1e+30"), ("gain", "holds weights up to"), ("trained-like", None),
     ("alpha", "adapter.lora.alpha = nan")],
)
def test_adapter_problem_says_which_files_load(tmp_path: Path, files: tuple[Path, list[Path]], kind: str,
                                               problem: str | None) -> None:
    """NaN, infinite or huge weights went InService and answered empty text: they are refused at load."""
    paths = {"missing": tmp_path / "none.gguf", "model": files[0], "lora": files[1][0],
             "text": tmp_path / "adapter_model.safetensors",
             "nan": build_lora_gguf(tmp_path / "nan.gguf", TINY, poison=float("nan")),
             "inf": build_lora_gguf(tmp_path / "inf.gguf", TINY, poison=float("inf")),
             "huge": build_lora_gguf(tmp_path / "huge.gguf", TINY, poison=1e30),
             "gain": build_lora_gguf(tmp_path / "gain.gguf", TINY, gain=1e6),
             "trained-like": build_lora_gguf(tmp_path / "gain10.gguf", TINY, gain=10.0),
             "alpha": build_lora_gguf(tmp_path / "alpha.gguf", TINY, alpha=float("nan"))}
    paths["text"].write_bytes(b"not gguf at all" * 10)
    found = adapter_problem(paths[kind])
    assert (found is None) if problem is None else (found is not None and problem in found)



def test_a_loaded_name_is_not_given_another_file(files: tuple[Path, list[Path]]) -> None:
    """Its KV is filed under its name and its handle may be in a running decode: another file takes another
    name (the model server versions an updated adapter's name, server/middleware/adapter_requests.py)."""
    model, adapters = files
    runner = LlamaRunner(model, n_ctx=256, n_seq_max=4, n_threads=2)
    try:
        first = runner.adapters.load("a", adapters[0])
        assert runner.adapters.load("a", adapters[0]) == first
        with pytest.raises(ValueError, match="under a name of its own"):
            runner.adapters.load("a", adapters[1])
        with pytest.raises(ValueError, match="under a name of its own"):
            runner.adapters.load("a", adapters[0], scale=0.5)
        assert runner.adapters.loaded == [first]
    finally:
        runner.close()
