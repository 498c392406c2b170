"""Objects the gateway reads and writes for users' jobs (asynchronous inference's inputs and answers, batch
transform's records): `s3://bucket/key` through boto3 against S3 or any S3-compatible store (AWS_ENDPOINT_URL_S3
picks one: MinIO, moto), and `file:///path` on the gateway's host, its path decided by `pier.host_path` (decoded once,
a '..' segment refused). Nothing here says whether an object is there: what ran is its job's record, not the store's.

Blocking calls: run them off the event loop (asyncio.to_thread). Every failure is a StorageError whose message names
the URL and how to fix it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pier import host_path
from pier.env import Env

SCHEMES = ("s3", "file")
_client: Any = None
_client_lock = threading.Lock()


class StorageError(Exception):
    """An object could not be read or written; the message says which and why."""


class TooLarge(StorageError):
    """An object larger than its reader takes, found before it was read."""


def check_url(url: str) -> None:
    """Raises StorageError unless `url` is an s3://bucket/key or file:///path pier can use."""
    parsed = urlparse(url)
    if parsed.scheme not in SCHEMES:
        raise StorageError(f"{url!r} is not an s3://bucket/key or file:///path URL; pier stores objects only there.")
    if parsed.scheme == "s3" and not parsed.netloc:
        raise StorageError(f"{url!r} names no bucket: write s3://BUCKET/KEY.")
    if parsed.scheme == "file":
        _path(url)


def join(base: str, name: str) -> str:
    """`name` under the folder `base` (an S3 prefix or a local folder), one '/' between them."""
    return base.rstrip("/") + "/" + name.lstrip("/")


def read(url: str, limit: int | None = None) -> bytes:
    """The whole object; TooLarge, before reading it, when it is over `limit` bytes (it would be read into memory)."""
    check_url(url)
    parsed = urlparse(url)
    if parsed.scheme == "file":
        try:
            _within(url, _path(url).stat().st_size, limit)
            return _path(url).read_bytes()
        except OSError as error:
            raise StorageError(f"Cannot read {url}: {error.strerror or error}.") from None
    bucket, key = parsed.netloc, parsed.path.lstrip("/")
    try:
        reply = client().get_object(Bucket=bucket, Key=key)
    except Exception as error:
        raise StorageError(f"Cannot read {url}: {why(error)}.") from None
    with reply["Body"] as body:
        _within(url, reply.get("ContentLength", 0), limit)
        try:
            data: bytes = body.read()
            return data
        except Exception as error:
            raise StorageError(f"Cannot read {url}: {why(error)}.") from None


def _within(url: str, size: int, limit: int | None) -> None:
    if limit is not None and size > limit:
        raise TooLarge(f"Cannot read {url}: it is {size} bytes, more than the {limit} this takes.")


def write(url: str, data: bytes, content_type: str | None = None, kms_key: str | None = None) -> None:
    """The whole object at `url`, replacing any there (a local file appears whole: written aside, then renamed).
    `kms_key`: an S3 object is encrypted with it (SSE-KMS); callers refuse it with file:// URLs up front."""
    check_url(url)
    parsed = urlparse(url)
    if parsed.scheme == "file":
        path = _path(url)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f".{path.name}.partial")
            with partial.open("wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())  # on disk before the rename: a kill never leaves half an object
            os.replace(partial, path)
        except OSError as error:
            raise StorageError(f"Cannot write {url}: {error.strerror or error}.") from None
        return
    extra = {"ContentType": content_type} if content_type else {}
    if kms_key:
        extra |= {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms_key}
    try:
        client().put_object(Bucket=parsed.netloc, Key=parsed.path.lstrip("/"), Body=data, **extra)
    except Exception as error:
        raise StorageError(f"Cannot write {url}: {why(error)}.") from None


def s3_client() -> Any:
    """An S3 client that ignores AWS_ENDPOINT_URL: users point that at pier itself (for the SageMaker clients),
    and pier serves no S3. AWS_ENDPOINT_URL_S3 still picks an S3-compatible store (MinIO, moto)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=Env().text("AWS_ENDPOINT_URL_S3"),
        config=Config(ignore_configured_endpoint_urls=True, retries={"max_attempts": 5, "mode": "standard"}),
    )


def client() -> Any:
    """One S3 client for the process (boto3's clients are thread-safe; making one costs tens of milliseconds)."""
    global _client
    with _client_lock:
        if _client is None:
            _client = s3_client()
        return _client


def _path(url: str) -> Path:
    try:
        return host_path.of_url(url)
    except host_path.PathRefused as error:
        raise StorageError(str(error)) from None


def why(error: Exception) -> str:
    from botocore.exceptions import ClientError

    if isinstance(error, ClientError):
        detail = error.response.get("Error", {})
        return (f"S3 answered {detail.get('Code', '?')} ({detail.get('Message', '')}); check the bucket, the key and "
                "the gateway's AWS credentials (and AWS_ENDPOINT_URL_S3 for an S3-compatible store)")
    return f"{type(error).__name__}: {error}; check that the store is reachable (AWS_ENDPOINT_URL_S3)"
