"""Where a model's handler script is, looked for where SageMaker's framework containers look, in their order.

1. `SAGEMAKER_SUBMIT_DIRECTORY`: a folder (`/opt/ml/model/code`, which the `sagemaker` SDK sets when it repacks
   the code into model.tar.gz; a `file://` path, which it sets for local code), or a `sourcedir.tar.gz` (an
   `s3://` URL, which the SDK sets when it uploads the code apart from the model, or a local archive), unpacked
   as the legacy framework containers do.
2. `code/` in the model data, where the inference toolkit puts its code directory.
3. The root of the model data: the PyTorch container archives the whole model folder for TorchServe, so an
   `inference.py` there is imported too.

The script is `SAGEMAKER_PROGRAM` (default `inference.py`). What is importable from it is what those containers
make importable: its own folder first (sibling modules), then `code/`, then the model folder.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlparse

from pier.server.byoc.errors import HandlerError
from pier.server.settings import HandlerSettings

log = logging.getLogger("pier.server.byoc")

DEFAULT_PROGRAM = "inference.py"
SAGEMAKER_MODEL_DIR = PurePosixPath("/opt/ml/model")  # what SageMaker's containers and the SDK call the model folder
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar")


@dataclass(frozen=True)
class HandlerScript:
    """A handler script and how it runs: `code_dir` holds its requirements.txt, `import_path` is what its
    imports see, in order (its own folder first)."""

    path: Path
    code_dir: Path
    import_path: tuple[Path, ...]
    found_by: str  # how it was found, in words, for the copy's log


@dataclass(frozen=True)
class HandlerSearch:
    """Where the handler was looked for and what was found there."""

    program: str
    named: bool  # SAGEMAKER_PROGRAM was set: the model means to run its own code
    script: HandlerScript | None
    looked_in: list[str] = field(default_factory=list)

    def missing(self) -> str:
        """Where the program was looked for, in words."""
        return f"{self.program} is in none of: {', '.join(self.looked_in)}"


def program_name(settings: HandlerSettings) -> tuple[str, bool]:
    """SAGEMAKER_PROGRAM as a file name (`serve` and `serve.py` alike), and whether it was set."""
    named = settings.program or ""
    program = named or DEFAULT_PROGRAM
    if not program.endswith(".py"):
        program += ".py"
    return program, bool(named)


def search_handler(model_dir: Path, settings: HandlerSettings | None = None) -> HandlerSearch:
    """The handler script for `model_dir`, looked for in SageMaker's order. An s3:// sourcedir.tar.gz is
    downloaded and unpacked here (raises HandlerError when that fails). `settings`: the copy's (default: read
    from this process's environment)."""
    model_dir = Path(model_dir)
    settings = settings or HandlerSettings.from_env()
    program, named = program_name(settings)
    looked_in: list[str] = []
    submitted = settings.submit_directory or ""
    code = model_dir / "code"
    if submitted:
        folder = submit_directory(submitted, model_dir, settings)
        looked_in.append(f"SAGEMAKER_SUBMIT_DIRECTORY={submitted}" + (f" ({folder})" if folder else ""))
        if folder is not None and (folder / program).is_file():
            extra = tuple(p for p in (code, model_dir) if p.resolve() != folder.resolve())
            return HandlerSearch(program, named, HandlerScript(
                folder / program, folder, (folder, *extra), f"SAGEMAKER_SUBMIT_DIRECTORY={submitted}"), looked_in)
    looked_in.append(str(code))
    if (code / program).is_file():
        return HandlerSearch(program, named, HandlerScript(code / program, code, (code, model_dir), "code/"),
                             looked_in)
    looked_in.append(f"the model folder {model_dir}")
    if (model_dir / program).is_file():
        # TorchServe imports it from the archived model folder; code/ comes first on its PYTHONPATH.
        script = HandlerScript(model_dir / program, code, (model_dir, code), "the root of the model data")
        return HandlerSearch(program, named, script, looked_in)
    return HandlerSearch(program, named, None, looked_in)


def find_handler(model_dir: Path, settings: HandlerSettings | None = None) -> Path | None:
    """The handler script's path, or None when there is none."""
    script = search_handler(model_dir, settings).script
    return script.path if script else None


def submit_directory(value: str, model_dir: Path, settings: HandlerSettings) -> Path | None:
    """The local folder SAGEMAKER_SUBMIT_DIRECTORY names, or None when it names nothing on this host
    (the SDK writes the notebook's own file:// path when it cannot repack; such code lives in the image)."""
    parsed = urlparse(value)
    if parsed.scheme == "s3":
        return _unpacked(_download_s3(value, settings), value, settings.cache_dir)
    raw = parsed.path if parsed.scheme == "file" else value
    path = _on_this_host(PurePosixPath(raw), model_dir)
    if path.is_dir():
        return path
    if path.is_file() and path.name.endswith(ARCHIVE_SUFFIXES):
        return _unpacked(path, value, settings.cache_dir)
    log.warning("SAGEMAKER_SUBMIT_DIRECTORY=%s names nothing on this host; looking in the model data instead", value)
    return None


def _on_this_host(path: PurePosixPath, model_dir: Path) -> Path:
    """/opt/ml/model/... is where the model data is on SageMaker; here it is `model_dir`."""
    on_sagemaker = path == SAGEMAKER_MODEL_DIR or SAGEMAKER_MODEL_DIR in path.parents
    if on_sagemaker and not Path(path).exists():
        return model_dir / path.relative_to(SAGEMAKER_MODEL_DIR)
    return Path(path)


# --- sourcedir.tar.gz ------------------------------------------------------------------------------


def _unpacked(archive: Path, name: str, cache_dir: Path) -> Path:
    """The archive unpacked once into the cache (keyed by its content), shared by workers and restarts."""
    digest = hashlib.sha256()
    with archive.open("rb") as data:
        for block in iter(lambda: data.read(1 << 20), b""):
            digest.update(block)
    folder = cache_dir / "sourcedir" / digest.hexdigest()[:24]
    if folder.is_dir():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".unpacking-"))
    try:
        with tarfile.open(archive, "r:*") as tar:
            tar.extractall(staging, filter="data")  # refuses absolute paths, `..`, links out and devices
        os.replace(staging, folder)
    except (tarfile.TarError, OSError) as error:
        shutil.rmtree(staging, ignore_errors=True)
        if folder.is_dir():  # another copy unpacked it meanwhile
            return folder
        raise HandlerError(500, f"SAGEMAKER_SUBMIT_DIRECTORY={name} could not be unpacked ({error}); pack the "
                                f"code folder with tar -czf sourcedir.tar.gz -C code .") from None
    log.info("unpacked SAGEMAKER_SUBMIT_DIRECTORY=%s into %s", name, folder)
    return folder


def _download_s3(url: str, settings: HandlerSettings) -> Path:
    from botocore.exceptions import BotoCoreError, ClientError

    parsed = urlparse(url)
    bucket, key = parsed.netloc, parsed.path.lstrip("/")
    if not bucket or not key.endswith(ARCHIVE_SUFFIXES):
        raise HandlerError(500, f"SAGEMAKER_SUBMIT_DIRECTORY={url} is not an s3:// URL of a sourcedir.tar.gz; "
                                f"name the archive the sagemaker SDK uploaded, or a folder.")
    target = settings.cache_dir / "sourcedir" / "downloads" / hashlib.sha256(url.encode()).hexdigest()[:24]
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    try:
        _s3_client(settings).download_file(bucket, key, str(partial))
    except (BotoCoreError, ClientError) as error:
        partial.unlink(missing_ok=True)
        raise HandlerError(500, f"SAGEMAKER_SUBMIT_DIRECTORY={url} could not be downloaded ({error}); check the "
                                f"URL, the credentials, and AWS_ENDPOINT_URL_S3 for an S3-compatible store.") from None
    os.replace(partial, target)
    log.info("downloaded SAGEMAKER_SUBMIT_DIRECTORY=%s", url)
    return target


def _s3_client(settings: HandlerSettings) -> Any:
    """S3 as the gateway reaches it: AWS_ENDPOINT_URL points at pier itself (for the SageMaker clients), so it
    is ignored; AWS_ENDPOINT_URL_S3 still picks an S3-compatible store."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", region_name=settings.s3_region, endpoint_url=settings.s3_endpoint,
        config=Config(ignore_configured_endpoint_urls=True, retries={"max_attempts": 5, "mode": "standard"}),
    )
