"""hf:// through huggingface_hub's own client against a local Hub stand-in (no internet here): a safetensors repo's
checkpoint files fetched (never its pickles or code), a gated repo refused with the fix, and served with the token
the model's own environment gives (HF_TOKEN, as TGI reads it)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import HfApi
from rich.console import Console

from pier.control.fetch.model_store import ModelDataError, ModelStore
from pier.control.fetch.source import source_of
from pier.control.shapes import ContainerSpec
from tests.hub_standin import Hub, hub_standin


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Hub]:
    repo = tmp_path / "repo"
    repo.mkdir()
    files = {"config.json": json.dumps({"architectures": ["LlamaForCausalLM"]}), "model.safetensors": "weights",
             "tokenizer.json": "{}", "pytorch_model.bin": "pickle", "modeling_llama.py": "import os", "README.md": "x"}
    for name, text in files.items():
        (repo / name).write_text(text)
    with hub_standin() as standin:
        standin.add("org/tiny", repo)
        standin.add("org/gated", repo, gated=True)
        yield standin


def store(tmp_path: Path, hub: Hub) -> ModelStore:
    return ModelStore(tmp_path / "cache", hub=lambda: HfApi(endpoint=hub.url, token=False),
                      console=Console(quiet=True))


def model(**environment: str) -> ContainerSpec:
    return ContainerSpec.model_validate({"Environment": environment})


def test_hf_model_id_of_a_safetensors_repo_fetches_the_checkpoint(tmp_path: Path, hub: Hub) -> None:
    folder = store(tmp_path, hub).fetch(source_of(model(HF_MODEL_ID="org/tiny")))
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json"]
    assert sorted(hub.downloads) == ["config.json", "model.safetensors", "tokenizer.json"]


def test_a_gated_repo_without_a_token_says_how_to_get_in(tmp_path: Path, hub: Hub) -> None:
    with pytest.raises(ModelDataError, match="hf://org/gated is a gated repo and the gateway has no token with access "
                                             "to it: accept the model's terms"):
        store(tmp_path, hub).fetch(source_of(model(HF_MODEL_ID="org/gated")))


@pytest.mark.parametrize("setting", ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"])
def test_the_models_own_token_opens_a_gated_repo(tmp_path: Path, hub: Hub, setting: str) -> None:
    source = source_of(model(HF_MODEL_ID="org/gated", **{setting: "hf_secret"}))
    assert "hf_secret" not in repr(source)
    assert (store(tmp_path, hub).fetch(source) / "model.safetensors").read_text() == "weights"


def test_a_repo_the_hub_does_not_have_says_what_to_check(tmp_path: Path, hub: Hub) -> None:
    with pytest.raises(ModelDataError, match=r"hf://org/nope: no such repo on the Hub, or a private one: check "
                                             r"HF_MODEL_ID's spelling, or set HF_TOKEN"):
        store(tmp_path, hub).fetch(source_of(model(HF_MODEL_ID="org/nope")))
