"""Finding the model to serve: a GGUF file, a folder's one GGUF, or a folder's own inference.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pier.server.model_location import ModelNotFound, find_gguf, locate_model


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


def test_a_gguf_file_is_served_as_is(tmp_path: Path) -> None:
    model = touch(tmp_path / "m.gguf")
    location = locate_model(str(model))
    assert location.gguf == model and location.model_dir == tmp_path and location.handler is None


def test_a_folders_one_gguf_even_nested(tmp_path: Path) -> None:
    model = touch(tmp_path / "extracted" / "model-q4_0.gguf")
    touch(tmp_path / "README.md")
    assert locate_model(tmp_path).gguf == model


def test_split_models_by_first_shard_and_projectors_skipped(tmp_path: Path) -> None:
    first = touch(tmp_path / "big-00001-of-00002.gguf")
    touch(tmp_path / "big-00002-of-00002.gguf")
    touch(tmp_path / "mmproj-big-f16.gguf")
    assert find_gguf(tmp_path) == first


def test_code_inference_py_means_the_users_own_handler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SAGEMAKER_PROGRAM", raising=False)
    monkeypatch.delenv("SAGEMAKER_SUBMIT_DIRECTORY", raising=False)
    touch(tmp_path / "model.gguf")
    handler = touch(tmp_path / "code" / "inference.py")
    location = locate_model(tmp_path)
    assert location.handler is not None and location.handler.path == handler
    assert location.gguf is None and location.model_dir == tmp_path


@pytest.mark.parametrize(("files", "fragment"), [
    ([], "No .gguf file in"),
    (["a.gguf", "b/c.gguf"], "holds 2 GGUF models (a.gguf, b/c.gguf)"),
    (["weights.bin"], "No .gguf file in"),
    (["config.json", "model.safetensors", "tokenizer.json"], "holds a Hugging Face checkpoint (config.json, "
     "safetensors), not a GGUF: serve it through the gateway (pier serve"),
])
def test_folders_without_exactly_one_model(tmp_path: Path, files: list[str], fragment: str) -> None:
    for name in files:
        touch(tmp_path / name)
    with pytest.raises(ModelNotFound, match=re.escape(fragment)):
        locate_model(tmp_path)


def test_missing_path_and_wrong_file(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFound, match="mount the model folder at /opt/ml/model"):
        locate_model(tmp_path / "nowhere")
    with pytest.raises(ModelNotFound, match=r"is not a \.gguf file"):
        locate_model(touch(tmp_path / "model.bin"))
