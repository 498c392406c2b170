from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pier import storage as shared
from pier.transform import job_objects
from pier.transform.job import check
from pier.transform.job_objects import LocationError, Source
from tests.transform.test_job import changed


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name in ("in/a.jsonl", "in/sub/b.jsonl", "input-2.jsonl", "other/c.jsonl"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    return tmp_path


def test_a_folder_prefix_names_objects_under_it(folder: Path) -> None:
    found = job_objects.inputs(f"file://{folder}/in/", "S3Prefix")
    assert [s.relative for s in found] == ["a.jsonl", "sub/b.jsonl"]
    assert job_objects.read(found[1].url) == b"in/sub/b.jsonl"


def test_a_key_prefix_matches_names_that_start_with_it(folder: Path) -> None:
    assert [s.relative for s in job_objects.inputs(f"file://{folder}/in", "S3Prefix")] == [
        "in/a.jsonl", "in/sub/b.jsonl", "input-2.jsonl"]


def test_a_manifest_lists_names_under_its_prefix(folder: Path) -> None:
    (folder / "manifest.json").write_text(json.dumps([{"prefix": f"file://{folder}/other/"}, "c.jsonl"]))
    assert job_objects.inputs(f"file://{folder}/manifest.json", "ManifestFile") == [
        Source(f"file://{folder}/other/c.jsonl", "c.jsonl")]
    (folder / "manifest.json").write_text("{}")
    with pytest.raises(LocationError, match="is not \\[\\{\"prefix\""):
        job_objects.inputs(f"file://{folder}/manifest.json", "ManifestFile")


def test_nothing_there_says_what_to_check(folder: Path) -> None:
    with pytest.raises(LocationError, match=r"There are no objects under .* check TransformInput's S3Uri"):
        job_objects.inputs(f"file://{folder}/nothing/", "S3Prefix")


def test_writes_are_whole_and_replace_another_jobs_but_not_their_own(folder: Path) -> None:
    target = f"file://{folder}/out/deep/a.jsonl.out"
    job_objects.write(target, b"one", owner="job a")
    job_objects.write(target, b"two", owner="job b")
    assert (folder / "out/deep/a.jsonl.out").read_bytes() == b"two"
    job_objects.write(target, b"three", owner="job b")  # its own, written before a kill: left as it is
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
    found = job_objects.inputs("s3://pier-jobs/data/in/", "S3Prefix")
    assert [s.relative for s in found] == ["x.jsonl", "y/z.jsonl"]
    job_objects.write(job_objects.join("s3://pier-jobs/out/", found[1].relative + ".out"),
                      job_objects.read(found[1].url), owner="job")
    assert s3.get_object(Bucket="pier-jobs", Key="out/y/z.jsonl.out")["Body"].read() == b"data/in/y/z.jsonl"  # type: ignore[attr-defined]


def test_a_bucket_that_is_not_there_says_so_rather_than_blaming_pier(s3: object) -> None:
    with pytest.raises(LocationError, match=r"Cannot list s3://nothing/in/: S3 answered NoSuchBucket"):
        job_objects.inputs("s3://nothing/in/", "S3Prefix")


@pytest.mark.parametrize("relative", ["../../escape.jsonl", "a/./b.jsonl", "a/../../b.jsonl"])
def test_an_output_never_lands_outside_a_local_output_folder(relative: str) -> None:
    """S3 keys may hold '..' segments: under a file:// S3OutputPath their outputs would escape the folder."""
    with pytest.raises(LocationError, match=r"outside file:///out/job.* Rename the object"):
        job_objects.output_url("file:///out/job", relative)
    assert job_objects.output_url("s3://b/out", relative) == f"s3://b/out/{relative}.out"  # a key, never a path


def test_an_output_is_named_after_its_input() -> None:
    assert job_objects.output_url("file:///out/job/", "sub/a.jsonl") == "file:///out/job/sub/a.jsonl.out"


def test_an_output_is_encrypted_with_the_jobs_kms_key(s3: object) -> None:
    job_objects.write("s3://pier-jobs/out/a.out", b"x", kms_key="alias/k", owner="job")
    head = s3.head_object(Bucket="pier-jobs", Key="out/a.out")  # type: ignore[attr-defined]
    assert (head["ServerSideEncryption"], head["SSEKMSKeyId"]) == ("aws:kms", "alias/k")
    assert check(changed(TransformOutput={"S3OutputPath": "s3://b/out", "KmsKeyId": "alias/k"})).kms_key == "alias/k"


def test_a_manifest_cannot_name_files_outside_its_local_prefix(folder: Path) -> None:
    (folder / "manifest.json").write_text(json.dumps([{"prefix": f"file://{folder}/other/"}, "../in/a.jsonl"]))
    with pytest.raises(LocationError, match=r"outside its prefix: '../in/a.jsonl' names a file outside"):
        job_objects.inputs(f"file://{folder}/manifest.json", "ManifestFile")


def test_a_percent_encoded_key_cannot_put_its_output_above_a_local_output_folder(s3: object) -> None:
    """Issue 41: s3://b/pin/%2e%2e/%2e%2e/x.jsonl under S3Prefix s3://b/pin/, S3OutputPath file:///srv/out/job,
    wrote x.jsonl.out two folders up: the '..' check read the literal key, the path was decoded after the join.
    (Bucket 'pier-jobs': S3 and moto take no one-letter bucket name; moto 5.2.6 routes 'batch' to its Batch mock.)"""
    s3.put_object(Bucket="pier-jobs", Key="pin/%2e%2e/%2e%2e/x.jsonl", Body=b"{}\n")  # type: ignore[attr-defined]
    [source] = job_objects.inputs("s3://pier-jobs/pin/", "S3Prefix")
    assert source.relative == "%2e%2e/%2e%2e/x.jsonl"
    with pytest.raises(LocationError, match=r"^The input '%2e%2e/%2e%2e/x.jsonl' cannot have its output under "
                                           r"file:///srv/out/job: .* once percent-decoded \('../../x.jsonl.out'\)"):
        job_objects.output_url("file:///srv/out/job", source.relative)
    # In S3 a key is a key: the output keeps its name, under the output prefix.
    assert job_objects.output_url("s3://pier-jobs/out", source.relative) == "s3://pier-jobs/out/%2e%2e/%2e%2e/x.jsonl.out"


@pytest.mark.parametrize("entry", ["%2e%2e/secret/s.jsonl", "%2e%2e/" * 40 + "etc/hostname",
                                   "%2E%2E%2fsecret%2fs.jsonl", "..%2fsecret/s.jsonl"])
def test_a_manifest_entry_spelled_percent_2e_cannot_leave_its_local_prefix(folder: Path, entry: str) -> None:
    """Issue 41: '…/in/%2e%2e/secret/s.jsonl' passed the '..' check and read outside the prefix (/etc/hostname the
    same way)."""
    (folder / "secret").mkdir()
    (folder / "secret/s.jsonl").write_text("SECRET")
    (folder / "manifest.json").write_text(json.dumps([{"prefix": f"file://{folder}/in/"}, entry]))
    with pytest.raises(LocationError, match=rf"lists a name outside its prefix: .* names a file outside "
                                           rf"file://{folder}/in/ once percent-decoded"):
        job_objects.inputs(f"file://{folder}/manifest.json", "ManifestFile")


def test_a_manifest_entry_spelled_percent_2e_cannot_write_outside_the_output_folder(s3: object) -> None:
    manifest = json.dumps([{"prefix": "s3://pier-jobs/in/"}, "%2e%2e/secret/s.jsonl"])
    s3.put_object(Bucket="pier-jobs", Key="m.json", Body=manifest)  # type: ignore[attr-defined]
    [source] = job_objects.inputs("s3://pier-jobs/m.json", "ManifestFile")
    # an S3 key, read as one
    assert source == Source("s3://pier-jobs/in/%2e%2e/secret/s.jsonl", "%2e%2e/secret/s.jsonl")
    with pytest.raises(LocationError, match=r"cannot have its output under file:///srv/out/job"):
        job_objects.output_url("file:///srv/out/job", source.relative)


def test_a_literal_dot_dot_in_a_manifests_local_prefix_is_refused(folder: Path) -> None:
    (folder / "secret").mkdir()
    (folder / "secret/s.jsonl").write_text("SECRET")
    (folder / "manifest.json").write_text(json.dumps([{"prefix": f"file://{folder}/in/../secret/"}, "s.jsonl"]))
    with pytest.raises(LocationError, match=r"The manifest's prefix .* has a '.' or '..' segment"):
        job_objects.inputs(f"file://{folder}/manifest.json", "ManifestFile")


def test_a_manifest_in_s3_cannot_name_a_file_prefix(s3: object, tmp_path: Path) -> None:
    """Issue 41: whoever wrote the manifest object read the gateway host's files into the job's S3 output."""
    (tmp_path / "hostname").write_text("HOST-FILE-CONTENT")
    body = json.dumps([{"prefix": f"file://{tmp_path}/"}, "hostname"])
    s3.put_object(Bucket="pier-jobs", Key="manifest.json", Body=body)  # type: ignore[attr-defined]
    with pytest.raises(LocationError, match=r"a manifest's prefix must be of its own kind \(s3://\)"):
        job_objects.inputs("s3://pier-jobs/manifest.json", "ManifestFile")


def test_a_local_manifest_lists_local_files(folder: Path) -> None:
    (folder / "manifest.json").write_text(json.dumps([{"prefix": "s3://pier-jobs/in/"}, "a.jsonl"]))
    with pytest.raises(LocationError, match=r"must be of its own kind \(file://\)"):
        job_objects.inputs(f"file://{folder}/manifest.json", "ManifestFile")


def test_local_names_are_url_text_decoded_once(folder: Path) -> None:
    """A file named '%2e%2e' is a file of that name: its name is quoted, so its output lands beside it, by name."""
    (folder / "in/%2e%2e").mkdir()
    (folder / "in/%2e%2e/odd name.jsonl").write_text("x")
    found = {s.relative: s for s in job_objects.inputs(f"file://{folder}/in/", "S3Prefix")}
    odd = found["%252e%252e/odd%20name.jsonl"]
    assert job_objects.read(odd.url) == b"x"
    job_objects.write(job_objects.output_url(f"file://{folder}/out", odd.relative), b"y", owner="job")
    assert (folder / "out/%2e%2e/odd name.jsonl.out").read_bytes() == b"y"
