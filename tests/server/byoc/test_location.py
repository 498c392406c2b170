"""Finding a model's handler script where SageMaker's containers find it, in their order, and what its imports
see: SAGEMAKER_SUBMIT_DIRECTORY (a folder, /opt/ml/model/code, file://, a sourcedir.tar.gz local or on S3), then
code/, then the root of the model data (the PyTorch container archives the whole model folder)."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import tarfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from pier.server.byoc.errors import HandlerError
from pier.server.byoc.location import find_handler, search_handler
from pier.server.byoc.pool import HandlerService
from pier.server.model_location import ModelNotFound, locate_model

HANDLER = """
    import os
    import helpers

    def model_fn(model_dir):
        return {"model_dir": model_dir, "files": sorted(os.listdir(model_dir))}

    def predict_fn(data, model):
        return {"module": __file__, "helper": helpers.NAME, "model_dir": model["model_dir"],
                "files": model["files"], "echo": data}
"""


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("SAGEMAKER_PROGRAM", "SAGEMAKER_SUBMIT_DIRECTORY", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIER_CACHE_DIR", str(tmp_path / "cache"))


def write(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def sourcedir_tar(files: dict[str, str]) -> bytes:
    """What the sagemaker SDK's tar_and_upload_dir writes: the code folder's files at the archive's root."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in files.items():
            data = textwrap.dedent(text).encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("files", "env", "expected"),
    [
        (["code/inference.py"], {}, "code/inference.py"),
        ([], {}, None),
        (["inference.py"], {}, "inference.py"),  # the PyTorch container imports it from the archived model folder
        (["inference.py", "code/inference.py"], {}, "code/inference.py"),  # code/ first
        (["code/serve.py"], {"SAGEMAKER_PROGRAM": "serve.py"}, "code/serve.py"),
        (["code/serve.py"], {"SAGEMAKER_PROGRAM": "serve"}, "code/serve.py"),
        (["serve.py"], {"SAGEMAKER_PROGRAM": "serve.py"}, "serve.py"),
        (["src/app.py"], {"SAGEMAKER_PROGRAM": "app.py", "SAGEMAKER_SUBMIT_DIRECTORY": "{root}/src"}, "src/app.py"),
        (["src/app.py", "code/app.py"], {"SAGEMAKER_PROGRAM": "app.py", "SAGEMAKER_SUBMIT_DIRECTORY": "file://{root}/src"},
         "src/app.py"),  # the submit directory before code/
        # The SDK's repack: code/ inside model.tar.gz, SAGEMAKER_SUBMIT_DIRECTORY=/opt/ml/model/code.
        (["code/inference.py"], {"SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code"}, "code/inference.py"),
        # A notebook's own folder (the SDK writes file:// when it cannot repack) is not on this host.
        (["code/inference.py"], {"SAGEMAKER_SUBMIT_DIRECTORY": "file:///home/notebook/code"}, "code/inference.py"),
        (["inference.py"], {"SAGEMAKER_SUBMIT_DIRECTORY": "/nowhere"}, "inference.py"),
    ],
)
def test_the_order_sagemaker_looks_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: list[str],
                                      env: dict[str, str], expected: str | None) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(root=tmp_path))
    for name in files:
        write(tmp_path / name)
    assert find_handler(tmp_path) == (tmp_path / expected if expected else None)


def test_what_each_places_imports_see(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "inference.py")
    root = search_handler(tmp_path).script
    assert root is not None and root.import_path == (tmp_path, tmp_path / "code")
    assert root.code_dir == tmp_path / "code"  # requirements.txt is read from code/, as the toolkit does
    write(tmp_path / "code" / "inference.py")
    code = search_handler(tmp_path).script
    assert code is not None and code.import_path == (tmp_path / "code", tmp_path)
    write(tmp_path / "src" / "inference.py")
    monkeypatch.setenv("SAGEMAKER_SUBMIT_DIRECTORY", str(tmp_path / "src"))
    submitted = search_handler(tmp_path).script
    assert submitted is not None
    assert submitted.import_path == (tmp_path / "src", tmp_path / "code", tmp_path)


def test_a_local_sourcedir_tar_gz_is_unpacked_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "sourcedir.tar.gz"
    archive.write_bytes(sourcedir_tar({"inference.py": HANDLER, "helpers.py": "NAME = 'tar'"}))
    monkeypatch.setenv("SAGEMAKER_SUBMIT_DIRECTORY", f"file://{archive}")
    first = find_handler(tmp_path / "model")
    assert first is not None and first.name == "inference.py" and (first.parent / "helpers.py").is_file()
    assert first.is_relative_to(tmp_path / "cache")
    assert find_handler(tmp_path / "model") == first  # same content, same folder


def test_an_archive_that_escapes_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "sourcedir.tar.gz"
    archive.write_bytes(sourcedir_tar({"../../evil.py": "", "inference.py": ""}))
    monkeypatch.setenv("SAGEMAKER_SUBMIT_DIRECTORY", str(archive))
    with pytest.raises(HandlerError, match="could not be unpacked"):
        find_handler(tmp_path)
    assert not (tmp_path / "evil.py").exists()


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    moto = pytest.importorskip("moto")
    import boto3

    for name, value in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1",
                        "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}.items():  # AWS_ENDPOINT_URL is pier's, not S3
        monkeypatch.setenv(name, value)
    with moto.mock_aws():
        client = boto3.client("s3", region_name="us-east-1", endpoint_url="https://s3.amazonaws.com")
        client.create_bucket(Bucket="sagemaker-us-east-1-1")
        yield client


def test_an_s3_sourcedir_tar_gz_is_downloaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3: object) -> None:
    key = "model-2024/source/sourcedir.tar.gz"
    s3.put_object(Bucket="sagemaker-us-east-1-1", Key=key,  # type: ignore[attr-defined]
                  Body=sourcedir_tar({"inference.py": HANDLER, "helpers.py": "NAME = 's3'"}))
    monkeypatch.setenv("SAGEMAKER_PROGRAM", "inference.py")
    monkeypatch.setenv("SAGEMAKER_SUBMIT_DIRECTORY", f"s3://sagemaker-us-east-1-1/{key}")
    write(tmp_path / "model" / "model.gguf")
    location = locate_model(tmp_path / "model")
    assert location.handler is not None and location.gguf is None
    assert (location.handler.code_dir / "helpers.py").read_text() == "NAME = 's3'"
    assert "SAGEMAKER_SUBMIT_DIRECTORY=s3://" in location.handler.found_by


def test_an_s3_sourcedir_that_is_missing_fails_with_the_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           s3: object) -> None:
    monkeypatch.setenv("SAGEMAKER_SUBMIT_DIRECTORY", "s3://sagemaker-us-east-1-1/nothing/sourcedir.tar.gz")
    with pytest.raises(HandlerError, match=r"s3://sagemaker-us-east-1-1/nothing/sourcedir\.tar\.gz could not be "
                                           r"downloaded"):
        locate_model(tmp_path)


# --- SAGEMAKER_PROGRAM that the model data does not hold --------------------------------------------


def test_a_named_program_that_is_missing_serves_the_gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """Images built for llama.cpp set SAGEMAKER_PROGRAM for a server of their own; the GGUF is served here."""
    monkeypatch.setenv("SAGEMAKER_PROGRAM", "serve.py")
    gguf = write(tmp_path / "model.gguf")
    with caplog.at_level(logging.WARNING, logger="pier.server"):
        location = locate_model(tmp_path)
    assert location.gguf == gguf and location.handler is None
    assert "SAGEMAKER_PROGRAM=serve.py is not in the model data" in caplog.text
    assert "serving model.gguf on pier's engine instead" in caplog.text


def test_neither_program_nor_gguf_names_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGEMAKER_PROGRAM", "serve.py")
    write(tmp_path / "README.md")
    with pytest.raises(ModelNotFound) as caught:
        locate_model(tmp_path)
    message = str(caught.value)
    assert "SAGEMAKER_PROGRAM=serve.py names a handler script that is not in the model data" in message
    assert f"serve.py is in none of: {tmp_path / 'code'}, the model folder {tmp_path}" in message
    assert f"No .gguf file in {tmp_path}" in message


# --- the handler runs as it would there: model_dir and sibling imports --------------------------------


def serve_once(model_dir: Path, payload: object, **options: object) -> dict[str, object]:
    async def main() -> dict[str, object]:
        service = HandlerService(model_dir, workers=1, timeout_s=30, **options)  # type: ignore[arg-type]
        try:
            await service.start()
            body, _ = await service.invoke(json.dumps(payload).encode(), "application/json", "application/json")
            return json.loads(body)  # type: ignore[no-any-return]
        finally:
            await service.stop()

    return asyncio.run(main())


@pytest.mark.e2e
def test_a_root_inference_py_imports_its_siblings_and_code(tmp_path: Path) -> None:
    model = tmp_path / "model"
    write(model / "inference.py", HANDLER.replace("import helpers", "import helpers, shared"))
    write(model / "helpers.py", "NAME = 'root'")
    write(model / "code" / "shared.py", "")  # code/ is importable too, as on TorchServe's PYTHONPATH
    write(model / "model.gguf")
    answer = serve_once(model, {"x": 1})
    assert answer["module"] == str(model / "inference.py") and answer["helper"] == "root"
    assert answer["model_dir"] == str(model) and "model.gguf" in answer["files"]  # type: ignore[operator]


@pytest.mark.e2e
def test_a_sourcedir_handler_gets_the_model_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "sourcedir.tar.gz"
    archive.write_bytes(sourcedir_tar({"inference.py": HANDLER, "helpers.py": "NAME = 'sourcedir'"}))
    monkeypatch.setenv("SAGEMAKER_SUBMIT_DIRECTORY", str(archive))
    model = tmp_path / "model"
    write(model / "model.gguf")
    location = locate_model(model)
    answer = serve_once(model, {"x": 1}, script=location.handler)
    assert answer["helper"] == "sourcedir" and answer["model_dir"] == str(model)
    assert str(answer["module"]).startswith(str(tmp_path / "cache" / "sourcedir"))
