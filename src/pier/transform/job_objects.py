"""A job's inputs (an S3 prefix or a manifest, listed) and outputs, over pier.storage (s3:// through boto3, any
S3-compatible store: AWS_ENDPOINT_URL_S3; file:// on this host). Blocking: call it from a thread. Writes are atomic
(one PUT; a file renamed into place), so an output is either whole or absent, and writing it again after a restart
replaces it with the same bytes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

from pier import host_path, storage
from pier.control.fetch import s3
from pier.transform import units as cutting


class LocationError(ValueError):
    """An input or output location pier cannot use, in words for a FailureReason."""


@dataclass(frozen=True)
class Source:
    url: str  # where to read it
    relative: str  # its name under the input prefix: its output is <S3OutputPath>/<relative>.out


def check_url(url: str, member: str) -> None:
    scheme = urlparse(url).scheme
    if scheme not in ("s3", "file"):
        raise LocationError(f"{member} {url!r} must be an s3://bucket/prefix or file:///path URL.")
    try:  # a bucket, an absolute path: refused at CreateTransformJob rather than failing the job as pier's error
        storage.check_url(url)
    except storage.StorageError as error:
        raise LocationError(f"{member} {error}") from None


def inputs(url: str, data_type: str) -> list[Source]:
    """The objects of an S3Prefix (every key that starts with it, by name) or of a ManifestFile."""
    if data_type == "ManifestFile":
        return _manifest(url, read(url))
    if data_type != "S3Prefix":
        raise LocationError(f"pier reads S3DataType S3Prefix or ManifestFile, not {data_type}.")
    found = _listing(url)
    if not found:
        raise LocationError(f"There are no objects under {url}: check TransformInput's S3Uri.")
    return sorted(found, key=lambda s: s.url)


def read(url: str) -> bytes:
    try:
        return storage.read(url)
    except storage.StorageError as error:
        raise LocationError(str(error)) from None


def write(url: str, data: bytes, kms_key: str | None = None, *, owner: str) -> None:
    """The whole object: a job resumed after a kill never finds half an output. `kms_key`: encrypted with it.
    `owner`: the job's input object it answers; one written for it already (before a kill, or by a leader whose
    lease lapsed) is left as it is, so each output is written once (`pier.storage.write_once`)."""
    try:
        storage.write_once(url, data, kms_key=kms_key, owner=owner)
    except storage.StorageError as error:
        raise LocationError(str(error)) from None


join = storage.join


def output_url(base: str, relative: str) -> str:
    """Where the output of the input named `relative` goes: `<base>/<relative>.out`. S3 keys may hold '.' and '..'
    segments, written or percent-encoded; under a file:// base (a folder on the gateway's host) they would write
    outside it, so they fail."""
    name = cutting.output_name(relative)
    if urlparse(base).scheme != "file":
        return join(base, name)
    try:
        return host_path.url_under(base, name)
    except host_path.PathRefused as error:
        raise LocationError(f"The input {relative!r} cannot have its output under {base}: {error}. Rename the "
                           "object, or write the outputs to s3://.") from None


def _listing(url: str) -> list[Source]:
    """Names are relative to the prefix's folder, as SageMaker names outputs."""
    if urlparse(url).scheme == "file":
        root = _local(url)
        folder, stem = (root, "") if url.endswith("/") else (root.parent, root.name)
        if not folder.is_dir():
            return []
        # A name is URL text, as the manifest's are: quoted here, decoded once when read or written.
        return [Source(path.as_uri(), quote(relative)) for path in folder.rglob("*")
                if path.is_file() and (relative := path.relative_to(folder).as_posix()).startswith(stem)]
    bucket, prefix = s3.split(url)
    base = prefix[: prefix.rfind("/") + 1]
    found = []
    try:  # a bucket not there, or not the gateway's to list, is the job's input at fault, not pier
        for page in _s3().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            found += [Source(f"s3://{bucket}/{item['Key']}", item["Key"][len(base):])
                      for item in page.get("Contents", []) if not item["Key"].endswith("/")]
    except Exception as error:
        raise LocationError(f"Cannot list {url}: {storage.why(error)}.") from None
    return found


def _manifest(url: str, data: bytes) -> list[Source]:
    """`[{"prefix": "s3://bucket/prefix/"}, "name1", "name2", ...]`, as SageMaker's ManifestFile is written."""
    try:
        entries = json.loads(data)
        prefix = entries[0]["prefix"]
        names = [str(name) for name in entries[1:]]
    except (ValueError, LookupError, TypeError):
        raise LocationError(f"The manifest {url} is not [{{\"prefix\": \"s3://bucket/prefix/\"}}, \"name\", ...].") \
            from None
    if not isinstance(prefix, str) or urlparse(prefix).scheme != urlparse(url).scheme:
        # Whoever may write the manifest object would otherwise choose what the gateway reads: one in S3 naming a
        # file:// prefix read the gateway host's files into the job's outputs. AWS takes s3:// prefixes only.
        raise LocationError(f"The manifest {url} names the prefix {prefix!r}: a manifest's prefix must be of its own "
                           f"kind ({urlparse(url).scheme}://): list objects stored where the manifest is.")
    check_url(prefix, "The manifest's prefix")
    if urlparse(prefix).scheme != "file":
        return [Source(join(prefix, name), name) for name in names]  # S3 keys: literal, never paths
    try:  # under a file:// prefix, '..' (or %2e%2e) would read any file of the gateway's host
        return [Source(host_path.url_under(prefix, name), name) for name in names]
    except host_path.PathRefused as error:
        raise LocationError(f"The manifest {url} lists a name outside its prefix: {error}. Name files under "
                           f"{prefix}.") from None


def _local(url: str) -> Path:
    try:
        return host_path.of_url(url)
    except host_path.PathRefused as error:
        raise LocationError(str(error)) from None


def _s3() -> Any:
    return storage.client()
