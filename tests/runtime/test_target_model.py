"""TargetModel against the endpoint it reaches, in SageMaker's words."""

from __future__ import annotations

from pathlib import Path

import pytest

from pier.runtime.errors import InvalidInvocation
from pier.runtime.target_model import Models, check_target_model


@pytest.fixture
def models(tmp_path: Path) -> Path:
    (tmp_path / "a.tar.gz").write_bytes(b"x")
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "b.gguf").write_bytes(b"x")
    (tmp_path / "notes.txt").write_text("x")
    return tmp_path


CASES = [
    # (name, url or None for a single-model endpoint, target, expected message start or None when accepted)
    ("single model, no target", None, None, None),
    ("single model, a target", None, "a.tar.gz",
     "Endpoint e is not a multi-model endpoint and does not support target model header."),
    ("multi-model, no target", "s3://bucket/mme/", None, "Request r-1 is missing a target model header."),
    ("an archive", "s3://bucket/mme/", "a.tar.gz", None),
    ("a GGUF in a folder", "s3://bucket/mme/", "team/b.gguf", None),
    ("unknown, on S3", "s3://bucket/mme/", "c.tar.gz",
     "Failed to download model data(bucket: bucket, key: mme/c.tar.gz). Please ensure that there is an object"),
    ("unknown, local", "file:///srv/mme/", "c.gguf", "Failed to download model data(path: /srv/mme/c.gguf)."),
    ("not a model file", "s3://bucket/mme", "notes.txt", "Failed to download model data(bucket: bucket, key: mme/"),
    ("out of the prefix", "s3://bucket/mme/", "../a.tar.gz", "Failed to download model data"),
    ("absolute", "s3://bucket/mme/", "/a.tar.gz", "Failed to download model data"),
    # A name the file system cannot hold was a 500 InternalFailure (stat's ENAMETOOLONG).
    ("longer than a file name", "s3://bucket/mme/", "x" * 300 + ".gguf", "Failed to download model data"),
    ("another spelling of a key", "s3://bucket/mme/", "./a.tar.gz", "Failed to download model data"),
]


@pytest.mark.parametrize(("name", "url", "target", "expected"), CASES, ids=[c[0] for c in CASES])
def test_check_target_model(models: Path, name: str, url: str | None, target: str | None,
                            expected: str | None) -> None:
    where = Models(str(models), url) if url is not None else None
    if expected is None:
        check_target_model("e", "r-1", target, where)
        return
    with pytest.raises(InvalidInvocation) as refused:
        check_target_model("e", "r-1", target, where)
    assert refused.value.message.startswith(expected)
    assert refused.value.wire.sagemaker_status == 400
