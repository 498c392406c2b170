"""A model's files onto a node that cannot see the gateway's folder: manifest, chunks, the node's cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from pier.backends.ray.models import Manifest, ModelFile, NodeModels, chunks, file_manifest, holds, manifest_of


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A model folder as pier's store makes one for a GGUF file elsewhere: a link to it, plus a code folder."""
    weights = tmp_path / "elsewhere" / "weights.gguf"
    weights.parent.mkdir()
    weights.write_bytes(bytes(range(256)) * 40)  # 10240 bytes
    folder = tmp_path / "models" / "sha256" / "abc123"
    (folder / "code").mkdir(parents=True)
    (folder / "model.gguf").symlink_to(weights)
    (folder / "code" / "inference.py").write_text("def model_fn(d):\n    return d\n")
    (folder / "empty.txt").write_bytes(b"")
    return folder


def test_the_manifest_follows_links_and_a_store_folder_keeps_its_digest(model: Path, tmp_path: Path) -> None:
    manifest = manifest_of(model)
    assert manifest.key == "abc123" and manifest.folder == str(model)
    assert manifest.files == (ModelFile("code/inference.py", 30), ModelFile("empty.txt", 0),
                              ModelFile("model.gguf", 10240))
    other = tmp_path / "plain"
    other.mkdir()
    (other / "model.gguf").write_bytes(b"x")
    first = manifest_of(other).key
    (other / "model.gguf").write_bytes(b"xy")
    assert len(first) == 64 and manifest_of(other).key != first  # a changed file is another model


def test_one_file_of_a_folder_is_a_manifest_of_its_own(model: Path, tmp_path: Path) -> None:
    """An adapter's GGUF alone, not the rest of its artifact; the same file is the same key, a changed one not."""
    manifest = file_manifest(model / "model.gguf")
    assert (manifest.folder, manifest.files) == (str(model), (ModelFile("model.gguf", 10240),))
    assert len(manifest.key) == 64 and file_manifest(model / "model.gguf").key == manifest.key
    assert holds(model, manifest) and [name for name, _, _ in chunks(manifest)] == ["model.gguf"]
    (model / "model.gguf").resolve().write_bytes(b"changed")
    assert file_manifest(model / "model.gguf").key != manifest.key


def test_a_node_receives_a_model_in_chunks_into_its_cache(model: Path, tmp_path: Path) -> None:
    manifest = manifest_of(model)
    node = NodeModels(tmp_path / "node" / "models")
    assert node.folder(manifest) is None
    scratch = node.begin()
    pieces = list(chunks(manifest, size=4096))
    assert [(name, offset, len(data)) for name, offset, data in pieces] == [
        ("code/inference.py", 0, 30), ("empty.txt", 0, 0),
        ("model.gguf", 0, 4096), ("model.gguf", 4096, 4096), ("model.gguf", 8192, 2048)]
    for name, offset, data in pieces:
        node.write(scratch, name, offset, data)
    folder = node.publish(scratch, manifest)
    assert folder == tmp_path / "node" / "models" / "abc123" and node.folder(manifest) == folder
    assert (folder / "model.gguf").read_bytes() == (model / "model.gguf").read_bytes()
    assert not (folder / "model.gguf").is_symlink() and holds(folder, manifest)
    again = node.begin()  # a second copy on the node got it too: the first one stays
    for name, offset, data in chunks(manifest):
        node.write(again, name, offset, data)
    assert node.publish(again, manifest) == folder and not again.exists()


def test_an_incomplete_or_escaping_transfer_is_refused(model: Path, tmp_path: Path) -> None:
    manifest = manifest_of(model)
    node = NodeModels(tmp_path / "node")
    scratch = node.begin()
    node.write(scratch, "model.gguf", 0, b"short")
    with pytest.raises(ValueError, match="incomplete"):
        node.publish(scratch, manifest)
    assert not scratch.exists() and node.folder(manifest) is None
    with pytest.raises(ValueError, match="outside the model folder"):
        node.write(node.begin(), "../../evil", 0, b"x")
    assert not holds(tmp_path / "nowhere", Manifest("x", "k", (ModelFile("a", 1),)))
