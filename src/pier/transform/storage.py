"""Where a job's objects are: s3:// through boto3 (any S3-compatible store: AWS_ENDPOINT_URL_S3) or file:// on
this host. Blocking: call it from a thread. Writes are atomic (one PUT; a file renamed into place), so an output
is either whole or absent, and writing it again after a restart replaces it with the same bytes."""

from __future__ import annotations

import functools
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from pier.control.fetch import s3


class StorageError(ValueError):
    """An input or output location pier cannot use, in words for a FailureReason."""


@dataclass(frozen=True)
class Source:
    url: str  # where to read it
    relative: str  # its name under the input prefix: its output is <S3OutputPath>/<relative>.out


def check_url(url: str, member: str) -> None:
    scheme = urlparse(url).scheme
    if scheme not in ("s3", "file"):
        raise StorageError(f"{member} {url!r} must be an s3://bucket/prefix or file:///path URL.")


def inputs(url: str, data_type: str) -> list[Source]:
    """The objects of an S3Prefix (every key that starts with it, by name) or of a ManifestFile."""
    if data_type == "ManifestFile":
        return _manifest(url, read(url))
    if data_type != "S3Prefix":
        raise StorageError(f"pier reads S3DataType S3Prefix or ManifestFile, not {data_type}.")
    base = url[: url.rfind("/") + 1]  # names are relative to the prefix's folder, as SageMaker names outputs
    found = [Source(u, u[len(base):]) for u in _listing(url)]
    if not found:
        raise StorageError(f"There are no objects under {url}: check TransformInput's S3Uri.")
    return sorted(found, key=lambda s: s.url)


def read(url: str) -> bytes:
    if url.startswith("file://"):
        try:
            return _local(url).read_bytes()
        except OSError as error:
            raise StorageError(f"Cannot read {url}: {error.strerror}.") from None
    bucket, key = s3.split(url)
    try:
        reply = _s3().get_object(Bucket=bucket, Key=key)
    except Exception as error:  # botocore's errors: the message names the bucket and key
        raise StorageError(f"Cannot read {url}: {error}") from None
    data: bytes = reply["Body"].read()
    return data


def write(url: str, data: bytes) -> None:
    if url.startswith("file://"):
        path = _local(url)
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(descriptor, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return
    bucket, key = s3.split(url)
    try:
        _s3().put_object(Bucket=bucket, Key=key, Body=data)
    except Exception as error:
        raise StorageError(f"Cannot write {url}: {error}") from None


def join(prefix: str, relative: str) -> str:
    return prefix.rstrip("/") + "/" + relative


def _listing(url: str) -> list[str]:
    if url.startswith("file://"):
        root = _local(url)
        folder, stem = (root, "") if url.endswith("/") else (root.parent, root.name)
        if not folder.is_dir():
            return []
        return [path.as_uri() for path in folder.rglob("*")
                if path.is_file() and path.relative_to(folder).as_posix().startswith(stem)]
    bucket, prefix = s3.split(url)
    found = []
    for page in _s3().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        found += [f"s3://{bucket}/{item['Key']}" for item in page.get("Contents", []) if not item["Key"].endswith("/")]
    return found


def _manifest(url: str, data: bytes) -> list[Source]:
    """`[{"prefix": "s3://bucket/prefix/"}, "name1", "name2", ...]`, as SageMaker's ManifestFile is written."""
    try:
        entries = json.loads(data)
        prefix = entries[0]["prefix"]
        names = [str(name) for name in entries[1:]]
    except (ValueError, LookupError, TypeError):
        raise StorageError(f"The manifest {url} is not [{{\"prefix\": \"s3://bucket/prefix/\"}}, \"name\", ...].") \
            from None
    check_url(prefix, "The manifest's prefix")
    return [Source(join(prefix, name), name) for name in names]


def _local(url: str) -> Path:
    parsed = urlparse(url)
    return Path(unquote(parsed.path))


@functools.cache
def _s3() -> Any:
    """One client for the process (boto3's clients are thread-safe; making one costs tens of ms)."""
    return s3.s3_client()
