"""Where captured files go, against moto's S3 server and a folder: the key under the prefix, KmsKeyId as SSE-KMS."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from pier.capture.destination import destination_of
from tests.sockets import free_port


@pytest.fixture(scope="module")
def s3() -> Iterator[Any]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port())
    server.start()
    host, port = server.get_host_and_port()
    try:
        client = boto3.client("s3", endpoint_url=f"http://{host}:{port}", region_name="us-east-1",
                              aws_access_key_id="x", aws_secret_access_key="x")
        client.create_bucket(Bucket="bucket")
        yield client
    finally:
        server.stop()


def test_s3_writes_under_the_prefix_encrypted_with_the_key(s3: Any) -> None:
    destination_of("s3://bucket/capture/", "alias/capture", lambda: s3).write("e/v/2024/05/01/13/x.jsonl", b"{}\n")
    head = s3.head_object(Bucket="bucket", Key="capture/e/v/2024/05/01/13/x.jsonl")
    assert (head["ServerSideEncryption"], head["SSEKMSKeyId"]) == ("aws:kms", "alias/capture")
    destination_of("s3://bucket", None, lambda: s3).write("e/v/x.jsonl", b"{}\n")  # no prefix, no key
    assert "ServerSideEncryption" not in s3.head_object(Bucket="bucket", Key="e/v/x.jsonl")


def test_a_folder_gets_whole_files(tmp_path: Path) -> None:
    destination_of(f"file://{tmp_path}/captured", None, lambda: None).write("e/v/2024/x.jsonl", b"{}\n")
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()] == [
        "captured/e/v/2024/x.jsonl"]


def test_a_folder_is_its_url_decoded_once_and_a_key_stays_under_it(tmp_path: Path) -> None:
    """The folder is decided as every file:// URL of pier is (pier.host_path): decoded once, and no key leaves it."""
    folder = destination_of(f"file://{tmp_path}/cap%20tured", None, lambda: None)
    folder.write("e/v/x.jsonl", b"{}\n")
    assert (tmp_path / "cap tured/e/v/x.jsonl").read_bytes() == b"{}\n"
    with pytest.raises(ValueError, match=r"'\.' or '\.\.' segment"):
        folder.write("../../escaped.jsonl", b"{}\n")
    assert not (tmp_path.parent / "escaped.jsonl").exists()
