"""Fetches in the background, as the reconciler reads them: a failure's reason, found before any converter runs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from rich.console import Console

from pier.control.fetch.fetches import Fetched, Fetches
from pier.control.fetch.model_store import ModelStore
from pier.control.fetch.source import ModelSource

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the gateway's loop; Fetches hands results back through it


async def settled(fetches: Fetches, source: ModelSource) -> Fetched:
    for _ in range(200):
        fetched = fetches.get(source)
        if fetched.folder is not None or fetched.error:
            return fetched
        await asyncio.sleep(0.05)
    raise AssertionError(f"{source.url} still fetching")


@pytest.mark.parametrize("base", ["/home/someone/llama-base", "llama-base", "a/b/c"])
async def test_an_adapter_whose_base_is_neither_here_nor_a_hub_id_fails_saying_so(tmp_path: Path, base: str) -> None:
    folder = tmp_path / "adapter"
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "base_model_name_or_path": base,
                                                            "r": 4, "lora_alpha": 8}))
    (folder / "adapter_model.safetensors").write_bytes(b"not read")
    fetches = Fetches(ModelStore(tmp_path / "store", console=Console(quiet=True)))
    fetched = await settled(fetches, ModelSource(str(folder)))
    assert f"its adapter_config.json names the base model {base!r}, which is no folder holding a config.json on " \
           "this host nor a Hub repo id" in fetched.error


@pytest.mark.parametrize(("convert", "outcome"), [
    (True, "has no tokenizer"),  # converted: refused before the converter runs
    (False, "served as it is"),  # a handler whose code is elsewhere loads it itself
])
async def test_a_checkpoint_is_converted_unless_a_handler_loads_it(tmp_path: Path, convert: bool,
                                                                   outcome: str) -> None:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    (folder / "model.safetensors").write_bytes(b"weights")
    fetches = Fetches(ModelStore(tmp_path / "store", console=Console(quiet=True)))
    fetched = await settled(fetches, ModelSource(str(folder), convert=convert))
    if convert:
        assert outcome in fetched.error
    else:
        assert fetched.folder == folder.resolve() and not fetched.error
