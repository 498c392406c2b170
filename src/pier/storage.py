"""Objects the gateway reads and writes for users' jobs (asynchronous inference's inputs and answers, batch
transform's records): `s3://bucket/key` through boto3 against S3 or any S3-compatible store (AWS_ENDPOINT_URL_S3
picks one: MinIO, moto), and `file:///path` on the gateway's host, its path decided by `pier.host_path` (decoded once,
a '..' segment refused). Nothing here says whether an object is there: what ran is its job's record, not the store's.

Blocking calls: run them off the event loop (asyncio.to_thread). Every failure is a StorageError whose message names
the URL and how to fix it.
"""

from __future__ import annotations

import errno
import os
import threading
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pier import host_path
from pier.env import Env

SCHEMES = ("s3", "file")
OWNER = "pier-owner"  # an S3 object's user metadata (x-amz-meta-pier-owner): who wrote it with write_once
XATTR = "user.pier.owner"  # a local file's, as an extended attribute
CONFLICTS = ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey", "412", "409")
TRIES = 3
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


def write_once(url: str, data: bytes, content_type: str | None = None, kms_key: str | None = None, *,
               owner: str) -> bool:
    """The whole object at `url` unless `owner` wrote it already: True when it is written now, False when `owner`'s
    is there (an earlier run of the same work wrote it; left as it is). Another owner's object there (a Filename two
    callers named) is replaced. On S3 the write is conditional (If-None-Match, or If-Match on the object replaced),
    so of two runs of one owner writing at once (a leader whose lease lapsed and the new one) one lands and the other
    is refused. A local file takes its name by a hard link, which fails where one is there; a filesystem without
    user extended attributes keeps no owner, and its files may be written again."""
    check_url(url)
    if urlparse(url).scheme == "file":
        return _file_once(url, data, owner)
    parsed = urlparse(url)
    put = {"Bucket": parsed.netloc, "Key": parsed.path.lstrip("/"), "Body": data, "Metadata": {OWNER: owner},
           **({"ContentType": content_type} if content_type else {}),
           **({"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms_key} if kms_key else {})}
    condition = {"IfNoneMatch": "*"}
    for _ in range(TRIES):
        try:
            client().put_object(**put, **condition)
            return True
        except Exception as error:
            if _code(error) not in CONFLICTS:
                raise StorageError(f"Cannot write {url}: {why(error)}.") from None
        head = _head(url)
        if head is not None and head.get("Metadata", {}).get(OWNER) == owner:
            return False
        condition = {"IfNoneMatch": "*"} if head is None else {"IfMatch": head["ETag"]}
    raise StorageError(f"Cannot write {url}: it changed under each of {TRIES} conditional writes; something else "
                       "writes that key at the same time: give each writer its own location.")


def written_by(url: str) -> str | None:
    """The owner `write_once` wrote the object at `url` for; None when there is none, or no owner is kept."""
    check_url(url)
    if urlparse(url).scheme == "file":
        return _file_owner(_path(url))
    head = _head(url)
    return None if head is None else head.get("Metadata", {}).get(OWNER)


def content_type(url: str) -> str | None:
    """The Content-Type the object at `url` was written with; None when there is none (a local file keeps none)."""
    check_url(url)
    if urlparse(url).scheme == "file":
        return None
    head = _head(url)
    return None if head is None else head.get("ContentType")


def _head(url: str) -> dict[str, Any] | None:
    parsed = urlparse(url)
    try:
        head: dict[str, Any] = client().head_object(Bucket=parsed.netloc, Key=parsed.path.lstrip("/"))
        return head
    except Exception as error:
        if _code(error) in ("404", "NoSuchKey", "NotFound"):
            return None
        raise StorageError(f"Cannot read {url}: {why(error)}.") from None


def _code(error: Exception) -> str | None:
    from botocore.exceptions import ClientError

    return str(error.response.get("Error", {}).get("Code")) if isinstance(error, ClientError) else None


def _file_once(url: str, data: bytes, owner: str) -> bool:
    path = _path(url)
    partial = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.partial")  # two writers never share one
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with partial.open("wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        try:
            os.setxattr(partial, XATTR, owner.encode())
        except OSError as error:
            if error.errno not in (errno.ENOTSUP, errno.EPERM):
                raise
        try:
            os.link(partial, path)  # fails where a file is: the check and the write are one step
            return True
        except FileExistsError:
            if _file_owner(path) == owner:
                return False
            os.replace(partial, path)
            return True
        finally:
            partial.unlink(missing_ok=True)
    except OSError as error:
        raise StorageError(f"Cannot write {url}: {error.strerror or error}.") from None


def _file_owner(path: Path) -> str | None:
    try:
        return os.getxattr(path, XATTR).decode()
    except OSError:
        return None  # no file, no owner kept, or a filesystem without user extended attributes


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
