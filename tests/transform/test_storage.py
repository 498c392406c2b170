from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pier import storage as shared
from pier.transform import storage
from pier.transform.job import check
from pier.transform.storage import Source, StorageError
from tests.transform.test_job import changed


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name in ("in/a.jsonl", "in/sub/b.jsonl", "input-2.jsonl", "other/c.jsonl"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    return tmp_path


def test_a_folder_prefix_names_objects_under_it(folder: Path) -> None:
    found = storage.inputs(f"file://{folder}/in/", "S3Prefix")
    assert [s.relative for s in found] == ["a.jsonl", "sub/b.jsonl"]
    assert storage.read(found[1].url) == b"in/sub/b.jsonl"


def test_a_key_prefix_matches_names_that_start_with_it(folder: Path) -> None:
    assert [s.relative for s in storage.inputs(f"file://{folder}/in", "S3Prefix")] == [
        "in/a.jsonl", "in/sub/b.jsonl", "input-2.jsonl"]


def test_a_manifest_lists_names_under_its_prefix(folder: Path) -> None:
    (folder / "manifest.json").write_text(json.dumps([{"prefix": f"file://{folder}/other/"}, "c.jsonl"]))
    assert storage.inputs(f"file://{folder}/manifest.json", "ManifestFile") == [
        Source(f"file://{folder}/other/c.jsonl", "c.jsonl")]
    (folder / "manifest.json").write_text("{}")
    with pytest.raises(StorageError, match="is not \\[\\{\"prefix\""):
        storage.inputs(f"file://{folder}/manifest.json", "ManifestFile")


def test_nothing_there_says_what_to_check(folder: Path) -> None:
    with pytest.raises(StorageError, match=r"There are no objects under .* check TransformInput's S3Uri"):
        storage.inputs(f"file://{folder}/nothing/", "S3Prefix")


def test_writes_are_whole_and_replace(folder: Path) -> None:
    target = f"file://{folder}/out/deep/a.jsonl.out"
    storage.write(target, b"one")
    storage.write(target, b"two")
    assert (folder / "out/deep/a.jsonl.out").read_bytes() == b"two"
    assert [p.name for p in (folder / "out/deep").iterdir()] == ["a.jsonl.out"]  # no temporary left behind


@pytest.fixture
def s3() -> Iterator[object]:
    moto = pytest.importorskip("moto")
    with moto.mock_aws():
        import boto3

        client = boto3.client("s3", region_name="us-east-1")
        # Not a bucket named like an AWS service's endpoint (batch, logs, ...): moto routes a request by its URL
        # and pier's client addresses buckets as hosts, so since moto 5.2.6 (whose Batch mock takes any path of
        # https://batch.*.amazonaws.com) CreateBucket of `batch` reached the Batch mock and answered 404.
        client.create_bucket(Bucket="pier-jobs")
        shared._client = None  # a client made inside moto's mock
        yield client
        shared._client = None


def test_s3_prefix_read_and_write(s3: object, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("data/in/x.jsonl", "data/in/y/z.jsonl", "data/elsewhere.jsonl"):
        s3.put_object(Bucket="pier-jobs", Key=key, Body=key.encode())  # type: ignore[attr-defined]
    found = storage.inputs("s3://pier-jobs/data/in/", "S3Prefix")
    assert [s.relative for s in found] == ["x.jsonl", "y/z.jsonl"]
    storage.write(storage.join("s3://pier-jobs/out/", found[1].relative + ".out"), storage.read(found[1].url))
    assert s3.get_object(Bucket="pier-jobs", Key="out/y/z.jsonl.out")["Body"].read() == b"data/in/y/z.jsonl"  # type: ignore[attr-defined]


def test_a_bucket_that_is_not_there_says_so_rather_than_blaming_pier(s3: object) -> None:
    with pytest.raises(StorageError, match=r"Cannot list s3://nothing/in/: S3 answered NoSuchBucket"):
        storage.inputs("s3://nothing/in/", "S3Prefix")


@pytest.mark.parametrize("relative", ["../../escape.jsonl", "a/./b.jsonl", "a/../../b.jsonl"])
def test_an_output_never_lands_outside_a_local_output_folder(relative: str) -> None:
    """S3 keys may hold '..' segments: under a file:// S3OutputPath their outputs would escape the folder."""
    with pytest.raises(StorageError, match=r"outside file:///out/job: rename the object"):
        storage.output_url("file:///out/job", relative)
    assert storage.output_url("s3://b/out", relative) == f"s3://b/out/{relative}.out"  # a key, never a path


def test_an_output_is_named_after_its_input() -> None:
    assert storage.output_url("file:///out/job/", "sub/a.jsonl") == "file:///out/job/sub/a.jsonl.out"


def test_an_output_is_encrypted_with_the_jobs_kms_key(s3: object) -> None:
    storage.write("s3://pier-jobs/out/a.out", b"x", kms_key="alias/k")
    head = s3.head_object(Bucket="pier-jobs", Key="out/a.out")  # type: ignore[attr-defined]
    assert (head["ServerSideEncryption"], head["SSEKMSKeyId"]) == ("aws:kms", "alias/k")
    assert check(changed(TransformOutput={"S3OutputPath": "s3://b/out", "KmsKeyId": "alias/k"})).kms_key == "alias/k"


def test_a_manifest_cannot_name_files_outside_its_local_prefix(folder: Path) -> None:
    (folder / "manifest.json").write_text(json.dumps([{"prefix": f"file://{folder}/other/"}, "../in/a.jsonl"]))
    with pytest.raises(StorageError, match=r"names '../in/a.jsonl', outside its prefix"):
        storage.inputs(f"file://{folder}/manifest.json", "ManifestFile")
