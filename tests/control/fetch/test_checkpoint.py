"""What makes a folder a convertible Hugging Face checkpoint, and every refusal found before the converter runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pier.control.fetch.checkpoint import (
    Adapter,
    CheckpointRefused,
    inspect,
    inspect_adapter,
    is_adapter,
    is_hf_layout,
    problem,
    wanted,
)

LLAMA = {"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"}


def folder_with(tmp_path: Path, files: dict[str, object]) -> Path:
    folder = tmp_path / "ckpt"
    folder.mkdir(exist_ok=True)
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content) if isinstance(content, dict) else str(content))
    return folder


def test_a_checkpoint_is_described(tmp_path: Path) -> None:
    folder = folder_with(tmp_path, {"config.json": LLAMA, "model.safetensors": "x" * 100, "tokenizer.json": {},
                                    "tokenizer_config.json": {}, "generation_config.json": {},
                                    "training_args.bin": "pickle", "modeling_evil.py": "import os"})
    found = inspect(folder, "s3://b/m/")
    assert (found.architecture, found.dtype, found.quant_method, found.weights_bytes) == (
        "LlamaForCausalLM", "bfloat16", "", 100)
    assert found.files == ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                           "tokenizer_config.json")  # no pickle, no code


def test_newer_transformers_write_dtype(tmp_path: Path) -> None:
    folder = folder_with(tmp_path, {"config.json": {"architectures": ["Qwen2ForCausalLM"], "dtype": "float32"},
                                    "model.safetensors": "x", "vocab.json": {}, "merges.txt": ""})
    assert inspect(folder).dtype == "float32"


@pytest.mark.parametrize(("files", "says"), [
    ({"config.json": LLAMA, "pytorch_model.bin": "pickle", "tokenizer.json": {}},
     "holds its weights only as pickled files (pytorch_model.bin), which pier never unpickles"),
    ({"config.json": LLAMA, "tokenizer.json": {}}, "has config.json but no *.safetensors weights"),
    ({"config.json": LLAMA, "model.safetensors": "x"}, "has no tokenizer (tokenizer.json, tokenizer.model"),
    ({"config.json": LLAMA, "model.safetensors": "x", "vocab.json": {}}, "has no tokenizer"),
    ({"adapter_config.json": {}, "adapter_model.bin": "x"}, "holds its LoRA adapter only as a pickle"),
    ({"adapter_config.json": {}}, "has adapter_config.json but no adapter_model.safetensors"),
    ({"model.safetensors": "x"}, "has no config.json"),
])
def test_refusals_from_the_names_alone(files: dict[str, object], says: str) -> None:
    assert says in problem(files, "org/repo")


@pytest.mark.parametrize(("config", "extra", "says"), [
    ({"architectures": []}, {}, "config.json names no architectures"),
    ("{not json", {}, "config.json is not readable JSON"),
    ({**LLAMA, "quantization_config": {"quant_method": "awq"}}, {},
     "is quantized with awq for GPUs, which llama.cpp's converter cannot dequantize. Use the model's original"),
    (LLAMA, {"model.safetensors.index.json": {"weight_map": {"a": "model-00001-of-00002.safetensors",
                                                             "b": "model-00002-of-00002.safetensors"}},
             "model-00001-of-00002.safetensors": "x"},
     "lacks 1 shard(s) its model.safetensors.index.json names (model-00002-of-00002.safetensors)"),
])
def test_refusals_from_the_config(tmp_path: Path, config: object, extra: dict[str, object], says: str) -> None:
    files = {"config.json": config, "model.safetensors": "x", "tokenizer.json": {}, **extra}
    with pytest.raises(CheckpointRefused) as refused:
        inspect(folder_with(tmp_path, files), "org/repo")
    assert says in str(refused.value)


def test_a_gptq_checkpoint_goes_to_the_converter_which_dequantizes_it(tmp_path: Path) -> None:
    config = {**LLAMA, "quantization_config": {"quant_method": "gptq", "bits": 4}}
    found = inspect(folder_with(tmp_path, {"config.json": config, "model.safetensors": "x", "tokenizer.json": {}}))
    assert found.quant_method == "gptq"


@pytest.mark.parametrize(("files", "layout"), [
    ({"config.json": LLAMA, "model.safetensors": "x"}, True),
    ({"config.json": LLAMA, "model.gguf": "GGUF"}, False),  # a GGUF is served as it is
    ({"config.json": LLAMA, "code/inference.py": "def model_fn(d): ..."}, False),  # the user's own code loads it
    ({"config.json": LLAMA, "code/serve.py": "..."}, False),  # SAGEMAKER_PROGRAM=serve.py
    ({"config.json": LLAMA, "inference.py": "..."}, False),
    ({"model.gguf": "GGUF"}, False),
    ({"config.json": LLAMA}, False),  # no weights: nothing to convert (the copy says what the folder lacks)
    ({"config.json": LLAMA, "pytorch_model.bin": "pickle"}, True),  # to be refused, saying why
])
def test_which_folders_are_converted(tmp_path: Path, files: dict[str, object], layout: bool) -> None:
    assert is_hf_layout(folder_with(tmp_path, files)) is layout


def test_what_a_hub_repo_contributes() -> None:
    names = ["config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
             "model.safetensors.index.json", "tokenizer.model", "tokenizer_config.json", "chat_template.jinja",
             "pytorch_model.bin", "flax_model.msgpack", "modeling_x.py", "original/consolidated.00.pth", "README.md",
             "onnx/model.onnx"]
    assert wanted(names) == ["chat_template.jinja", "config.json", "model-00001-of-00002.safetensors",
                             "model-00002-of-00002.safetensors", "model.safetensors.index.json", "tokenizer.model",
                             "tokenizer_config.json"]


@pytest.mark.parametrize(("settings", "says"), [
    ({"peft_type": "IA3", "base_model_name_or_path": "org/base"}, "is a IA3 adapter; llama.cpp converts LoRA adapters"),
    ({"peft_type": "LORA"}, "names no base_model_name_or_path: set it to the base model's Hub id"),
])
def test_adapter_refusals(tmp_path: Path, settings: dict[str, object], says: str) -> None:
    folder = folder_with(tmp_path, {"adapter_config.json": settings, "adapter_model.safetensors": "x"})
    with pytest.raises(CheckpointRefused) as refused:
        inspect_adapter(folder, "org/adapter")
    assert says in str(refused.value)


def test_a_peft_adapter_is_described(tmp_path: Path) -> None:
    folder = folder_with(tmp_path, {"adapter_config.json": {"peft_type": "LORA", "base_model_name_or_path": "org/b"},
                                    "adapter_model.safetensors": "x", "README.md": "x"})
    assert is_adapter(folder) and is_hf_layout(folder)
    assert inspect_adapter(folder) == Adapter("org/b", ("adapter_config.json", "adapter_model.safetensors"))
