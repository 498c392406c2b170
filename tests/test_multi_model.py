"""What a multi-model copy and the gateway tell each other."""

from __future__ import annotations

from pathlib import Path

import pytest

from pier.multi_model import CacheReport, is_multi_model, model_path


def test_cache_report_travels_in_headers() -> None:
    report = CacheReport(False, 1500, 20, 300, ("a.tar.gz", "team/b.gguf"))
    assert CacheReport.of(report.headers()) == report
    assert CacheReport.of({"content-type": "application/json"}) is None  # a single-model copy's answer


def test_is_multi_model() -> None:
    assert is_multi_model({"SAGEMAKER_MULTI_MODEL": "True"})
    assert not is_multi_model({"SAGEMAKER_MULTI_MODEL": "false"}) and not is_multi_model({})


@pytest.mark.parametrize(("name", "found"), [
    ("a.tar.gz", True), ("team/b.gguf", True), ("c.tgz", False), ("notes.txt", False), ("team", False),
    ("../a.tar.gz", False), ("/a.tar.gz", False), ("", False), ("team/../outside.gguf", False),
    ("%2e%2e/outside.gguf", False),  # a name is a key, never decoded: no folder '%2e%2e' is there
])
def test_model_path(tmp_path: Path, name: str, found: bool) -> None:
    (tmp_path / "outside.gguf").write_bytes(b"x")
    root = tmp_path / "models"
    (root / "team").mkdir(parents=True)
    (root / "a.tar.gz").write_bytes(b"x")
    (root / "team" / "b.gguf").write_bytes(b"x")
    (root / "notes.txt").write_text("x")
    assert (model_path(root, name) is not None) is found


@pytest.mark.parametrize("name", ["x" * 300 + ".gguf", "team/" + "y" * 256 + ".tar.gz"])
def test_a_name_longer_than_the_file_system_allows_names_no_model(tmp_path: Path, name: str) -> None:
    """TargetModel may be 1024 characters (botocore's model); a path part past the file system's 255 made stat()
    raise ENAMETOOLONG, which the gateway answered as a 500 InternalFailure."""
    assert model_path(tmp_path, name) is None


@pytest.mark.parametrize("name", ["./a.tar.gz", "team//b.gguf", "team/./b.gguf", "a.tar.gz/"])
def test_a_name_is_the_key_as_written(tmp_path: Path, name: str) -> None:
    """SageMaker joins TargetModel to the S3 prefix as a key, and S3 keys are literal: "./a.tar.gz" is no object.
    Taking such spellings as the same file loaded that model once per spelling on a copy."""
    (tmp_path / "a.tar.gz").write_bytes(b"x")
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "b.gguf").write_bytes(b"x")
    assert model_path(tmp_path, name) is None
