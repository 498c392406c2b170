"""Where captured files go: an S3 bucket and prefix (boto3; any S3-compatible store) or a folder on this host."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from pier import host_path


class Destination(Protocol):
    def write(self, key: str, body: bytes) -> None:
        """Store `body` at `key` (a path under the destination); raises when it could not."""
        ...


class S3Destination:
    def __init__(self, client: Any, bucket: str, prefix: str, kms_key: str | None = None) -> None:
        self.client = client
        self.bucket = bucket
        self.prefix = prefix
        # KmsKeyId: captured data encrypted at rest with that key (S3 server-side encryption), as SageMaker does.
        self.encryption = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms_key} if kms_key else {}

    def write(self, key: str, body: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=_join(self.prefix, key), Body=body,
                               ContentType="application/jsonl", **self.encryption)


class FolderDestination:
    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, key: str, body: bytes) -> None:
        path = host_path.under(self.root, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Whole files only: a reader listing the folder never sees a half-written one.
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".part")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(body)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


def destination_of(uri: str, kms_key: str | None, s3_client: Callable[[], Any]) -> Destination:
    """The destination a DataCaptureConfig's DestinationS3Uri names (checked when the config was made)."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return FolderDestination(host_path.of_url(uri))
    return S3Destination(s3_client(), parsed.netloc, parsed.path.strip("/"), kms_key)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}/{key}" if prefix else key
