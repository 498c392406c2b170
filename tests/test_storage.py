"""pier.storage against moto's S3 (in process) and a temporary folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from pier import storage


@pytest.fixture
def bucket(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from moto import mock_aws

    settings = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.setattr(storage, "_client", None)
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="answers")
        yield "answers"
    monkeypatch.setattr(storage, "_client", None)


def test_s3_objects_are_written_and_read(bucket: str) -> None:
    url = f"s3://{bucket}/out/one.out"
    storage.write(url, b'{"a": 1}', "application/json")
    assert storage.read(url) == b'{"a": 1}'
    head = boto3.client("s3", region_name="us-east-1").head_object(Bucket=bucket, Key="out/one.out")
    assert head["ContentType"] == "application/json"


def test_an_object_is_encrypted_with_the_kms_key_given(bucket: str) -> None:
    """KmsKeyId (AsyncInferenceConfig.OutputConfig, TransformOutput) encrypts outputs, as on SageMaker."""
    storage.write(f"s3://{bucket}/out/secret.out", b"x", "text/plain", kms_key="alias/answers")
    head = boto3.client("s3", region_name="us-east-1").head_object(Bucket=bucket, Key="out/secret.out")
    assert (head["ServerSideEncryption"], head["SSEKMSKeyId"]) == ("aws:kms", "alias/answers")


def test_a_missing_s3_object_is_an_error_naming_it(bucket: str) -> None:
    with pytest.raises(storage.StorageError, match=r"s3://answers/nothing.*NoSuchKey"):
        storage.read(f"s3://{bucket}/nothing")


def test_an_object_over_the_limit_is_refused_before_it_is_read(bucket: str, tmp_path: Path) -> None:
    """An asynchronous input of gigabytes must not be read into the gateway's memory to be refused by the copy."""
    url = f"s3://{bucket}/in/big"
    storage.write(url, b"x" * 101)
    (tmp_path / "big").write_bytes(b"x" * 101)
    for where in (url, (tmp_path / "big").as_uri()):
        assert storage.read(where, limit=101) == b"x" * 101
        with pytest.raises(storage.TooLarge, match=rf"Cannot read {where}: it is 101 bytes, more than the 100 "):
            storage.read(where, limit=100)


def test_local_files_appear_whole(tmp_path: Path) -> None:
    url = (tmp_path / "deep" / "answer.out").as_uri()
    storage.write(url, b"hello")
    assert storage.read(url) == b"hello"
    assert [p.name for p in (tmp_path / "deep").iterdir()] == ["answer.out"]  # no partial file left


@pytest.mark.parametrize(("url", "problem"), [
    ("http://host/x", "is not an s3://"), ("s3:///key", "names no bucket"), ("ftp://x/y", "is not an s3://"),
    ("file://relative/out", "is not an absolute path"),  # 'relative' is a host: the path would have been /out
    ("file:///srv/out/job/%2e%2e/%2e%2e/x.jsonl.out", "has a '.' or '..' segment once percent-decoded"),
])
def test_urls_pier_cannot_use_are_refused(url: str, problem: str) -> None:
    with pytest.raises(storage.StorageError, match=problem):
        storage.check_url(url)


@pytest.mark.parametrize(("base", "name", "joined"), [
    ("s3://b/out", "x.out", "s3://b/out/x.out"), ("s3://b/out/", "/x.out", "s3://b/out/x.out"),
])
def test_join(base: str, name: str, joined: str) -> None:
    assert storage.join(base, name) == joined


def test_an_owned_s3_object_is_written_once_by_its_owner(bucket: str) -> None:
    """A leader killed after writing an answer and before recording it, or one whose lease lapsed while it wrote:
    the next run of the same request must not write it again (issue 40). Versions count the PUTs that landed."""
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    url = f"s3://{bucket}/out/a.out"
    assert storage.written_by(url) is None
    assert storage.write_once(url, b"first", "text/plain", owner="request-a")
    assert not storage.write_once(url, b"second", "text/plain", owner="request-a")  # its own: left as it is
    assert storage.read(url) == b"first" and storage.written_by(url) == "request-a"
    assert storage.write_once(url, b"other", "text/plain", owner="request-b")  # a Filename another caller named
    assert storage.read(url) == b"other" and storage.written_by(url) == "request-b"
    versions = s3.list_object_versions(Bucket=bucket, Prefix="out/a.out")["Versions"]
    assert len(versions) == 2


def test_an_owned_local_file_is_written_once_by_its_owner(tmp_path: Path) -> None:
    url = (tmp_path / "out" / "a.out").as_uri()
    assert storage.written_by(url) is None
    assert storage.write_once(url, b"first", owner="request-a")
    before = (tmp_path / "out" / "a.out").stat().st_ino
    assert not storage.write_once(url, b"second", owner="request-a")
    assert storage.read(url) == b"first" and (tmp_path / "out" / "a.out").stat().st_ino == before
    assert storage.write_once(url, b"other", owner="request-b")
    assert storage.read(url) == b"other" and storage.written_by(url) == "request-b"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.out"]


def test_the_content_type_an_object_was_written_with_is_read_back(bucket: str, tmp_path: Path) -> None:
    url = f"s3://{bucket}/out/typed.out"
    assert storage.content_type(url) is None  # no object
    assert storage.write_once(url, b"{}", "application/json", owner="r1")
    assert storage.content_type(url) == "application/json"
    local = (tmp_path / "typed.out").as_uri()
    assert storage.write_once(local, b"{}", "application/json", owner="r1")
    assert storage.content_type(local) is None  # a local file keeps none
