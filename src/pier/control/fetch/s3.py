"""Model files in S3: one object (a model.tar.gz or a single GGUF) or every object under a prefix."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlparse

from pier.control.fetch.archives import UnsafeArchive
from pier.env import Env


@dataclass(frozen=True)
class S3Object:
    key: str
    etag: str
    size: int


def s3_client() -> Any:
    """An S3 client that ignores AWS_ENDPOINT_URL: users point that at pier itself (for the SageMaker clients),
    and pier serves no S3. AWS_ENDPOINT_URL_S3 still picks an S3-compatible store (MinIO, moto)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=Env().text("AWS_ENDPOINT_URL_S3"),
        config=Config(ignore_configured_endpoint_urls=True, retries={"max_attempts": 5, "mode": "standard"}),
    )


def split(url: str) -> tuple[str, str]:
    parsed = urlparse(url)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise ValueError(f"{url!r} is not an s3://bucket/key URL.")
    return parsed.netloc, parsed.path.lstrip("/")


def head(client: Any, url: str) -> S3Object | None:
    """The object at `url`, or None when there is none (then the URL may be a prefix)."""
    from botocore.exceptions import ClientError

    bucket, key = split(url)
    if not key or key.endswith("/"):
        return None
    try:
        reply = client.head_object(Bucket=bucket, Key=key)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return None
        raise
    return S3Object(key, reply["ETag"].strip('"'), int(reply["ContentLength"]))


def listing(client: Any, url: str) -> list[S3Object]:
    """Every object under the prefix `url` (a folder's worth: the prefix is taken to end at a '/')."""
    bucket, prefix = split(url)
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    found = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            if not item["Key"].endswith("/"):  # folder markers some tools create
                found.append(S3Object(item["Key"], item["ETag"].strip('"'), int(item["Size"])))
    return found


def prefix_identity(url: str, objects: list[S3Object]) -> str:
    """What the files under a prefix are, by their ETags (S3's content hashes) and relative names."""
    rows = sorted((relative(url, o.key), o.etag, o.size) for o in objects)
    return "s3-prefix:" + hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def relative(url: str, key: str) -> str:
    """`key` relative to the prefix in `url`, refused when it would land outside the model folder."""
    _, prefix = split(url)
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    name = key[len(prefix) :]
    parts = PurePosixPath(name).parts
    if not name or name.startswith("/") or ".." in parts:
        raise UnsafeArchive(f"S3 key {key!r} would be written outside the model folder; rename it.")
    return name


def download(client: Any, url: str, key: str, dest: Path, advance: Callable[[int], None]) -> None:
    bucket, _ = split(url)
    dest.parent.mkdir(parents=True, exist_ok=True)
    client.download_file(bucket, key, str(dest), Callback=advance)
