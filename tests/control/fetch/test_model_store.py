"""Fetching model files: local paths, file://, model.tar.gz (and archives that try to escape), s3:// against
moto, hf:// against a fake Hub (no internet here)."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from rich.console import Console

from pier.control.fetch.model_store import ModelDataError, ModelStore
from pier.control.fetch.source import ModelSource, NoModelData, from_url, source_of
from pier.control.shapes import ContainerSpec

GGUF = b"GGUF" + bytes(2048)


@pytest.fixture
def store(tmp_path: Path) -> ModelStore:
    return ModelStore(tmp_path / "cache", console=Console(quiet=True))


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    (folder / "code").mkdir(parents=True)
    (folder / "model.gguf").write_bytes(GGUF)
    (folder / "code" / "inference.py").write_text("def model_fn(model_dir):\n    return model_dir\n")
    return folder


def tar_gz(members: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    return buffer.getvalue()


def cached_folders(store: ModelStore) -> list[Path]:
    root = store.root / "sha256"
    return sorted(root.iterdir()) if root.exists() else []


def test_a_local_folder_is_served_where_it_is(store: ModelStore, model_dir: Path) -> None:
    assert store.fetch(ModelSource(str(model_dir))) == model_dir.resolve()
    assert store.fetch(from_url(f"file://{model_dir}")) == model_dir.resolve()
    assert cached_folders(store) == []


def test_a_gguf_file_gets_a_folder_of_its_own(store: ModelStore, model_dir: Path) -> None:
    (model_dir / "other.gguf").write_bytes(GGUF)
    folder = store.fetch(from_url(str(model_dir / "model.gguf")))
    assert [p.name for p in folder.iterdir()] == ["model.gguf"]
    assert (folder / "model.gguf").resolve() == (model_dir / "model.gguf").resolve()
    assert store.fetch(from_url(str(model_dir / "model.gguf"))) == folder


def test_a_file_url_is_decided_as_every_file_url_of_pier(store: ModelStore, model_dir: Path) -> None:
    """Decoded once (pier.host_path); a '..' segment, written or encoded, is refused rather than resolved."""
    spaced = model_dir.parent / "my models"
    model_dir.rename(spaced)
    assert store.fetch(from_url(f"file://{model_dir.parent}/my%20models")) == spaced.resolve()
    with pytest.raises(ModelDataError, match=r"The model's data .* has a '.' or '..' segment"):
        store.fetch(from_url(f"file://{spaced}/%2e%2e/my%20models"))


def test_a_missing_path_says_so(store: ModelStore, tmp_path: Path) -> None:
    with pytest.raises(ModelDataError, match=r"No model at .*nowhere: give an existing folder"):
        store.fetch(ModelSource(str(tmp_path / "nowhere")))


def test_model_tar_gz_is_unpacked_once_by_content(store: ModelStore, tmp_path: Path) -> None:
    archive = tmp_path / "model.tar.gz"
    archive.write_bytes(tar_gz({"model.gguf": GGUF, "code/inference.py": b"x = 1\n"}))
    folder = store.fetch(from_url(str(archive)))
    assert (folder / "model.gguf").read_bytes() == GGUF
    assert (folder / "code" / "inference.py").read_text() == "x = 1\n"
    copy = tmp_path / "same-bytes.tar.gz"
    copy.write_bytes(archive.read_bytes())
    assert store.fetch(from_url(f"file://{copy}")) == folder  # same content, same folder
    assert cached_folders(store) == [folder]
    assert list((store.root / "tmp").iterdir()) == []


@pytest.mark.parametrize(("name", "members", "links", "problem"), [
    ("climbs out with ..", {"../evil.txt": b"x"}, {}, "would be written outside the model folder"),
    ("absolute path", {"/tmp/evil.txt": b"x"}, {}, "would be written outside the model folder"),
    ("climbs out deeper", {"code/../../evil.txt": b"x"}, {}, "would be written outside the model folder"),
    ("symlink out", {"model.gguf": GGUF}, {"code": "/etc"}, "links to '/etc', outside the model folder"),
    ("relative symlink out", {}, {"sub/link": "../../outside"}, "links to '../../outside'"),
])
def test_archives_that_escape_their_folder_are_refused(store: ModelStore, tmp_path: Path, name: str,
                                                       members: dict[str, bytes], links: dict[str, str],
                                                       problem: str) -> None:
    archive = tmp_path / "model.tar.gz"
    archive.write_bytes(tar_gz(members, links))
    with pytest.raises(ModelDataError, match=problem):
        store.fetch(from_url(str(archive)))
    assert not (tmp_path / "evil.txt").exists() and not Path("/tmp/evil.txt").exists()
    assert cached_folders(store) == [], name


def test_an_archive_that_is_no_archive(store: ModelStore, tmp_path: Path) -> None:
    archive = tmp_path / "model.tar.gz"
    archive.write_bytes(b"not a tar")
    with pytest.raises(ModelDataError, match="not a readable tar archive"):
        store.fetch(from_url(str(archive)))


# ---- s3:// (moto)


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from moto import mock_aws

    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="models")
        yield client


def test_s3_prefix_uncompressed_as_model_data_source(store: ModelStore, s3: Any) -> None:
    s3.put_object(Bucket="models", Key="llm/model.gguf", Body=GGUF)
    s3.put_object(Bucket="models", Key="llm/code/inference.py", Body=b"x = 1\n")
    s3.put_object(Bucket="models", Key="llm-other/ignored.gguf", Body=GGUF)  # a sibling prefix, not a child
    container = ContainerSpec.model_validate({"ModelDataSource": {"S3DataSource": {
        "S3Uri": "s3://models/llm/", "S3DataType": "S3Prefix", "CompressionType": "None"}}})
    source = source_of(container)
    assert source == ModelSource("s3://models/llm/", prefix=True)
    folder = store.fetch(source)
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        "code/inference.py", "model.gguf"]
    assert store.fetch(ModelSource("s3://models/llm", prefix=True)) == folder  # fetched once


def test_s3_model_tar_gz(tmp_path: Path, s3: Any) -> None:
    store = ModelStore(tmp_path / "cache", s3=lambda: s3, console=Console(quiet=True))
    s3.put_object(Bucket="models", Key="llm/model.tar.gz", Body=tar_gz({"model.gguf": GGUF}))
    calls: list[str] = []
    s3.meta.events.register("before-call.s3.GetObject", lambda **kw: calls.append("get"))
    folder = store.fetch(from_url("s3://models/llm/model.tar.gz"))
    assert (folder / "model.gguf").read_bytes() == GGUF
    assert calls == ["get"]
    assert store.fetch(from_url("s3://models/llm/model.tar.gz")) == folder
    assert calls == ["get"]  # known by its ETag: not downloaded again


def test_s3_malicious_tar_gz_is_refused(store: ModelStore, s3: Any) -> None:
    s3.put_object(Bucket="models", Key="evil/model.tar.gz", Body=tar_gz({"../../evil": b"x"}))
    with pytest.raises(ModelDataError, match="outside the model folder"):
        store.fetch(from_url("s3://models/evil/model.tar.gz"))


def test_s3_single_gguf_object(store: ModelStore, s3: Any) -> None:
    s3.put_object(Bucket="models", Key="m/tiny.gguf", Body=GGUF)
    folder = store.fetch(from_url("s3://models/m/tiny.gguf"))
    assert [p.name for p in folder.iterdir()] == ["tiny.gguf"]


def test_s3_nothing_there(store: ModelStore, s3: Any) -> None:
    with pytest.raises(ModelDataError, match=r"Nothing under s3://models/empty/"):
        store.fetch(from_url("s3://models/empty/"))


def test_s3_ignores_an_aws_endpoint_url_that_points_at_pier(store: ModelStore, s3: Any,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # users set this to reach pier's SageMaker API
    s3.put_object(Bucket="models", Key="m/tiny.gguf", Body=GGUF)
    assert (store.fetch(from_url("s3://models/m/tiny.gguf")) / "tiny.gguf").exists()


# ---- hf:// (a fake Hub: the tests have no internet)


@dataclass
class Sibling:
    rfilename: str
    size: int


@dataclass
class Info:
    sha: str
    siblings: list[Sibling]


class FakeHub:
    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.downloads: list[str] = []

    def model_info(self, repo_id: str, *, revision: str | None = None, files_metadata: bool = False) -> Info:
        assert files_metadata
        return Info("c0ffee" + (revision or "main"), [Sibling(n, len(d)) for n, d in self.files.items()])

    def hf_hub_download(self, repo_id: str, filename: str, *, revision: str | None = None,
                        local_dir: str | Path | None = None) -> str:
        assert revision is not None and revision.startswith("c0ffee")  # pinned to the commit resolved first
        self.downloads.append(filename)
        target = Path(local_dir or ".") / filename
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(self.files[filename])
        return str(target)


def hub_store(tmp_path: Path, hub: FakeHub) -> ModelStore:
    return ModelStore(tmp_path / "cache", hub=lambda: hub, console=Console(quiet=True))


def test_hf_repo_with_one_gguf(tmp_path: Path) -> None:
    hub = FakeHub({"README.md": b"hi", "model.Q4_0.gguf": GGUF, "mmproj-f16.gguf": b"GGUF",
                   "model.safetensors": b"big"})
    store = hub_store(tmp_path, hub)
    folder = store.fetch(from_url("hf://org/tiny-GGUF"))
    assert sorted(p.name for p in folder.iterdir()) == ["model.Q4_0.gguf"]
    assert store.fetch(from_url("hf://org/tiny-GGUF")) == folder
    assert hub.downloads == ["model.Q4_0.gguf"]  # once


def test_hf_named_file_and_revision(tmp_path: Path) -> None:
    hub = FakeHub({"a.Q4_0.gguf": GGUF, "a.Q8_0.gguf": GGUF + b"8"})
    folder = hub_store(tmp_path, hub).fetch(from_url("hf://org/tiny-GGUF@v1/a.Q8_0.gguf"))
    assert (folder / "a.Q8_0.gguf").read_bytes() == GGUF + b"8"


def test_hf_shards_and_code_come_along(tmp_path: Path) -> None:
    hub = FakeHub({"m-00001-of-00002.gguf": GGUF, "m-00002-of-00002.gguf": GGUF, "code/inference.py": b"x"})
    folder = hub_store(tmp_path, hub).fetch(from_url("hf://org/m"))
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        "code/inference.py", "m-00001-of-00002.gguf", "m-00002-of-00002.gguf"]


@pytest.mark.parametrize(("files", "url", "problem"), [
    ({"a.Q4_0.gguf": GGUF, "a.Q8_0.gguf": GGUF}, "hf://org/a", r"holds 2 GGUF models .* name one, e\.g\. hf://org/a/a"),
    ({"model.safetensors": b"x"}, "hf://org/a", "org/a has no config.json: give a Hugging Face checkpoint folder"),
    ({"config.json": b"{}", "pytorch_model.bin": b"x", "tokenizer.json": b"{}"}, "hf://org/a",
     "holds its weights only as pickled files .* which pier never unpickles"),
    ({"a.gguf": GGUF}, "hf://org/a/b.gguf", "has no file 'b.gguf'; its GGUF files: a.gguf"),
])
def test_hf_problems_say_what_to_do(tmp_path: Path, files: dict[str, bytes], url: str, problem: str) -> None:
    with pytest.raises(ModelDataError, match=problem):
        hub_store(tmp_path, FakeHub(files)).fetch(from_url(url))


def test_hf_model_id_from_a_tgi_environment_is_a_hub_repo() -> None:
    container = ContainerSpec.model_validate({"Environment": {"HF_MODEL_ID": "org/tiny-GGUF"}})
    assert source_of(container) == ModelSource("hf://org/tiny-GGUF")


@pytest.mark.parametrize(("container", "artifact", "expected"), [
    ({"ModelDataUrl": "s3://b/m/model.tar.gz"}, None, ModelSource("s3://b/m/model.tar.gz", archive=True)),
    ({"ModelDataUrl": "s3://b/m/"}, None, ModelSource("s3://b/m/", prefix=True)),
    ({"ModelDataSource": {"S3DataSource": {"S3Uri": "s3://b/m.tar.gz", "S3DataType": "S3Object",
                                           "CompressionType": "Gzip"}}}, None,
     ModelSource("s3://b/m.tar.gz", archive=True)),
    ({"ModelDataUrl": "/models/x"}, "hf://o/r/f.gguf", ModelSource("hf://o/r/f.gguf")),
])
def test_where_model_files_come_from(container: dict[str, Any], artifact: str | None, expected: ModelSource) -> None:
    assert source_of(ContainerSpec.model_validate(container), artifact) == expected


@pytest.mark.parametrize(("environment", "convert"), [
    ({}, True),
    ({"SAGEMAKER_PROGRAM": "", "SAGEMAKER_SUBMIT_DIRECTORY": ""}, True),  # the SDK's HuggingFaceModel, no entry_point
    ({"SAGEMAKER_PROGRAM": "inference.py", "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code"}, True),  # repacked
    ({"SAGEMAKER_PROGRAM": "inference.py", "SAGEMAKER_SUBMIT_DIRECTORY": "s3://b/sourcedir.tar.gz"}, False),
])
def test_a_checkpoint_stays_one_for_a_handler_whose_code_is_elsewhere(environment: dict[str, str],
                                                                     convert: bool) -> None:
    container = ContainerSpec.model_validate({"ModelDataUrl": "s3://b/m/", "Environment": environment})
    assert source_of(container).convert is convert


def test_unsupported_url_scheme() -> None:
    with pytest.raises(NoModelData, match="pier cannot fetch 'gs://b/m'"):
        from_url("gs://b/m")


def test_hf_repo_without_gguf_fetches_its_checkpoint_but_never_pickles_or_code(tmp_path: Path) -> None:
    hub = FakeHub({"config.json": b"{}", "model-00001-of-00002.safetensors": b"a",
                   "model-00002-of-00002.safetensors": b"b",
                   "model.safetensors.index.json": b"{}", "tokenizer.json": b"{}", "tokenizer_config.json": b"{}",
                   "pytorch_model.bin": b"pickle", "modeling_x.py": b"import os", "README.md": b"hi"})
    folder = hub_store(tmp_path, hub).fetch(from_url("hf://org/tiny"))
    assert sorted(hub.downloads) == ["config.json", "model-00001-of-00002.safetensors",
                                     "model-00002-of-00002.safetensors", "model.safetensors.index.json",
                                     "tokenizer.json", "tokenizer_config.json"]
    assert sorted(p.name for p in folder.iterdir()) == sorted(hub.downloads)


def test_hf_download_larger_than_the_disk_is_refused_before_it_starts(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    hub = FakeHub({"config.json": b"{}", "model.safetensors": b"w" * 5000, "tokenizer.json": b"{}"})
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda path: real(path)._replace(free=1000))
    with pytest.raises(ModelDataError, match=r"hf://org/big is 0\.0 GB, more than the 0\.0 GB free in .*: free some"):
        hub_store(tmp_path, hub).fetch(from_url("hf://org/big"))
    assert hub.downloads == []
