"""Where a model's files come from, read from its container definition the way SageMaker reads it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from urllib.parse import urlparse

from pier import host_path
from pier.control.fetch import precision
from pier.control.shapes import ContainerSpec

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar")
SCHEMES = ("s3", "hf", "file")
TOKEN_SETTINGS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")  # TGI's names for a Hub token


class NoModelData(ValueError):
    """The container names no model files; the message says which field to set."""


@dataclass(frozen=True)
class ModelSource:
    url: str  # a local path, file://, s3:// or hf:// URL
    archive: bool = False  # a tar (usually model.tar.gz) to unpack
    prefix: bool = False  # every S3 object under the URL, as S3DataType S3Prefix with CompressionType None
    quantize: str = ""  # HF_MODEL_QUANTIZE / QUANTIZE: the precision a Hugging Face checkpoint is converted to
    token: str = field(default="", repr=False)  # the model's own HF_TOKEN for a gated or private hf:// repo
    convert: bool = True  # a Hugging Face checkpoint is converted to GGUF; not for a handler whose code is elsewhere

    @property
    def scheme(self) -> str:
        parsed = urlparse(self.url)
        return parsed.scheme if parsed.scheme in SCHEMES else "file"

    @property
    def local_path(self) -> str:
        """The path of a local or file:// source; NoModelData when a file:// URL names no path pier will use."""
        if urlparse(self.url).scheme != "file":
            return os.path.expanduser(self.url)
        try:
            return str(host_path.of_url(self.url))
        except host_path.PathRefused as error:
            raise NoModelData(f"The model's data {error}") from None


def source_of(container: ContainerSpec, artifact_url: str | None = None) -> ModelSource:
    """An inference component's ArtifactUrl wins over its model's data; then ModelDataSource, ModelDataUrl, and
    last Environment.HF_MODEL_ID (a local folder, or a Hugging Face repo id as TGI containers take it). A
    checkpoint in Hugging Face layout is converted at the precision the environment asks for (HF_MODEL_QUANTIZE)."""
    environment = container.Environment
    token = next((environment[k] for k in TOKEN_SETTINGS if environment.get(k)), "")
    return replace(_located(container, artifact_url), quantize=precision.setting(environment), token=token,
                   convert=not _code_elsewhere(environment))


def _code_elsewhere(environment: dict[str, str]) -> bool:
    """The model's own inference code comes from outside its model data (SAGEMAKER_SUBMIT_DIRECTORY naming an
    s3:// sourcedir.tar.gz, as the sagemaker SDK sets it for an entry_point it does not repack): that code loads
    the model files as they are, so a checkpoint among them stays a checkpoint."""
    submitted = environment.get("SAGEMAKER_SUBMIT_DIRECTORY", "").strip()
    return bool(submitted) and not submitted.startswith("/opt/ml/model")


def _located(container: ContainerSpec, artifact_url: str | None) -> ModelSource:
    if artifact_url:
        return from_url(artifact_url)
    s3 = container.ModelDataSource.S3DataSource if container.ModelDataSource else None
    if s3 is not None:
        archive = s3.CompressionType == "Gzip"
        return ModelSource(s3.S3Uri, archive=archive, prefix=not archive and s3.S3DataType == "S3Prefix")
    if container.ModelDataUrl:
        return from_url(container.ModelDataUrl)
    hf_model = container.Environment.get("HF_MODEL_ID")
    if hf_model:
        return ModelSource(hf_model if os.path.exists(hf_model) else f"hf://{hf_model}")
    raise NoModelData(
        "The model has no files to serve: set PrimaryContainer.ModelDataUrl (a local path, file://, s3:// or "
        "hf:// URL, or a model.tar.gz), ModelDataSource.S3DataSource, or Environment.HF_MODEL_ID."
    )


def from_url(url: str) -> ModelSource:
    """A URL as given in ModelDataUrl: an archive by its name; an s3:// URL that is no archive is a prefix."""
    scheme = urlparse(url).scheme
    if "://" in url and scheme not in SCHEMES:
        raise NoModelData(
            f"pier cannot fetch {url!r}: use a local path, or a file://, s3:// or hf://org/repo[/file.gguf] URL."
        )
    archive = url.lower().endswith(ARCHIVE_SUFFIXES)
    prefix = urlparse(url).scheme == "s3" and not archive and url.endswith("/")
    return ModelSource(url, archive=archive, prefix=prefix)
