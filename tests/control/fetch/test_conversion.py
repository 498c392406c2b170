"""Real conversions with llama.cpp's own converter (fetched by pip from llama-cpp-python's sdist on first use) of
random checkpoints made here with transformers: converted once, quantized by llama.cpp, refused with reasons."""

from __future__ import annotations

import importlib.util
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pier.control.fetch import converter
from pier.control.fetch.conversion import Conversions
from pier.control.fetch.model_store import ModelDataError
from tests import checkpoints

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(bool(converter.missing_modules()), reason="the converter's packages (torch, transformers, "
                       "sentencepiece: the test extra) are not installed"),
]


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return checkpoints.llama(tmp_path_factory.mktemp("ckpt") / "llama")


class Counting:
    """llama.cpp's converter located for real, counting how often a conversion needed it."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> Path:
        self.calls += 1
        return converter.locate()


@pytest.fixture(scope="module")
def converted(llama: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Conversions, Path, list[str], Counting]:
    locate = Counting()
    conversions = Conversions(tmp_path_factory.mktemp("store"), locate=locate)
    steps: list[str] = []
    return conversions, conversions.serve(llama, "", steps.append, "s3://b/llama/"), steps, locate


def test_a_sharded_checkpoint_is_converted_once_at_its_own_precision(
        converted: tuple[Conversions, Path, list[str], Counting], llama: Path) -> None:
    conversions, folder, steps, locate = converted
    assert [p.name for p in folder.iterdir()] == ["model-f32.gguf"]  # saved as float32: served as F32
    shards = len(list(llama.glob("model-*-of-*.safetensors")))
    assert shards > 1 and f"reading shard 1 of {shards}" in steps and f"reading shard {shards} of {shards}" in steps
    assert "converting: 100% written" in steps and steps[-1] == "converted"
    assert list((conversions.root / "tmp").iterdir()) == []
    again: list[str] = []
    assert conversions.serve(llama, "", again.append) == folder
    assert (locate.calls, again) == (1, [])  # the second ask converts nothing


def test_greedy_answers_equal_the_checkpoints_own(converted: tuple[Conversions, Path, list[str], Counting],
                                                  llama: Path) -> None:
    import llama_cpp

    model = llama_cpp.Llama(str(converted[1] / "model-f32.gguf"), n_ctx=128, verbose=False)
    agreed = 0
    for prompt in checkpoints.PROMPTS:
        ids = model.tokenize(prompt.encode(), add_bos=True)
        expected, gap = checkpoints.greedy(llama, ids, 12)
        model.reset()
        mine = [t for t, _ in zip(model.generate(ids, top_k=1, temp=0.0), range(12), strict=False)]
        if gap > 1e-3:
            assert mine == expected, prompt
            agreed += 1
    assert agreed >= 3
    template = model.metadata.get("tokenizer.chat_template")
    assert template == checkpoints.CHAT_TEMPLATE  # the chat template came along


@pytest.mark.parametrize("kind", ["mistral", "gemma2", "gemma3", "phi3", "qwen2", "qwen3"])
def test_each_architecture_answers_greedily_as_transformers(kind: str, tmp_path: Path) -> None:
    import llama_cpp

    folder = checkpoints.made(tmp_path / kind, kind)
    served = Conversions(tmp_path / "store").serve(folder, "", lambda step: None)
    model = llama_cpp.Llama(str(next(served.glob("*.gguf"))), n_ctx=128, verbose=False)
    agreed = 0
    for prompt in checkpoints.PROMPTS:
        ids = model.tokenize(prompt.encode(), add_bos=True)
        expected, gap = checkpoints.greedy(folder, ids, 12)
        model.reset()
        if gap > 1e-3:
            assert [t for t, _ in zip(model.generate(ids, top_k=1, temp=0.0), range(12), strict=False)] == expected
            agreed += 1
    assert agreed >= 3


def test_a_peft_lora_adapter_answers_as_the_checkpoint_it_merges_into(tmp_path: Path) -> None:
    import llama_cpp

    base = checkpoints.llama(tmp_path / "base", shard_size=None)
    adapter = checkpoints.lora(tmp_path / "adapter", base, "org/base")
    reference = checkpoints.merged(base, adapter, tmp_path / "merged")
    conversions = Conversions(tmp_path / "store")
    asked: list[str] = []

    def base_config(name: str) -> Path:
        asked.append(name)
        return base

    base_gguf = next(conversions.serve(base, "", lambda step: None).glob("*.gguf"))
    served = conversions.serve(adapter, "", lambda step: None, base_config=base_config)
    assert asked == ["org/base"] and [p.name for p in served.iterdir()] == ["adapter-f32.gguf"]
    model = llama_cpp.Llama(str(base_gguf), lora_path=str(served / "adapter-f32.gguf"), n_ctx=128, verbose=False)
    agreed = 0
    for prompt in checkpoints.PROMPTS:
        ids = model.tokenize(prompt.encode(), add_bos=True)
        expected, gap = checkpoints.greedy(reference, ids, 10)
        model.reset()
        if gap > 1e-3:
            assert [t for t, _ in zip(model.generate(ids, top_k=1, temp=0.0), range(10), strict=False)] == expected
            agreed += 1
    assert agreed >= 3


def test_q4_k_m_is_made_by_llama_cpps_quantizer(converted: tuple[Conversions, Path, list[str], Counting],
                                               llama: Path) -> None:
    from gguf import GGUFReader

    conversions = converted[0]
    steps: list[str] = []
    folder = conversions.serve(llama, "q4_k_m", steps.append)
    assert folder != converted[1] and [p.name for p in folder.iterdir()] == ["model-q4_k_m.gguf"]
    assert any(step.startswith("quantizing: tensor") for step in steps)
    file_type = GGUFReader(folder / "model-q4_k_m.gguf").get_field("general.file_type")
    assert file_type is not None and file_type.contents() == 15  # LLAMA_FTYPE_MOSTLY_Q4_K_M


def test_an_unknown_architecture_fails_naming_it_within_a_minute(tmp_path: Path) -> None:
    folder = checkpoints.llama(tmp_path / "fancy", shard_size=None, architecture="FancyNetForCausalLM")
    conversions = Conversions(tmp_path / "store")
    started = time.monotonic()
    with pytest.raises(ModelDataError, match=r"is a FancyNetForCausalLM, an architecture llama\.cpp's converter does "
                                             r"not know: serve a GGUF of the model"):
        conversions.serve(folder, "", lambda step: None, "s3://b/fancy/")
    assert time.monotonic() - started < 60
    assert not (tmp_path / "store" / "converted").exists() and list((tmp_path / "store" / "tmp").iterdir()) == []


def test_a_retrained_bpe_tokenizer_fails_naming_its_pre_tokenizer(tmp_path: Path) -> None:
    folder = checkpoints.with_retrained_bpe(checkpoints.made(tmp_path / "qwen", "qwen2"))
    with pytest.raises(ModelDataError, match=r"tokenizer \(Qwen2ForCausalLM\) has a BPE pre-tokenizer llama\.cpp's "
                                             r"converter does not recognize .* use the model's original tokenizer"):
        Conversions(tmp_path / "store").serve(folder, "", lambda step: None)


def test_a_conversion_a_dead_gateway_left_halfway_is_not_trusted_and_runs_again(
        converted: tuple[Conversions, Path, list[str], Counting], llama: Path, tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    key = converted[1].name  # named by what it is made from, wherever the store is
    orphan = tmp_path / "store" / "tmp" / f"convert-{key[:16]}-{dead.pid}-abc"
    (orphan / "out").mkdir(parents=True)
    (orphan / "out" / "model-f32.gguf").write_bytes(b"GGUF" + bytes(10))  # half-written when its gateway died
    folder = Conversions(tmp_path / "store").serve(llama, "", lambda step: None)
    assert folder.name == key and not orphan.exists()
    assert (folder / "model-f32.gguf").read_bytes() == (converted[1] / "model-f32.gguf").read_bytes()


def test_without_the_converters_packages_the_reason_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real: Callable[[str], object] = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "torch" else real(name))
    with pytest.raises(converter.ConverterMissing, match=r'needs torch, not installed .* pip install "pier\[hf\]"'):
        converter.locate()
