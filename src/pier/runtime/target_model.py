"""InvokeEndpoint's TargetModel against the endpoint it reaches: a multi-model variant needs one that names a model
under its prefix; any other endpoint refuses the header. Refusals are SageMaker's ValidationErrors (400), in its
words where they are known."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from pier.multi_model import model_path
from pier.runtime.errors import InvalidInvocation


@dataclass(frozen=True)
class Models:
    """A multi-model variant's models: the folder they were fetched to, and the ModelDataUrl prefix given."""

    folder: str
    url: str


def check_target_model(endpoint: str, request_id: str, target_model: str | None, models: Models | None) -> None:
    if models is None:
        if target_model is not None:
            # SageMaker's words (quoted in github.com/aws/amazon-sagemaker-examples issue 1026).
            raise InvalidInvocation(
                f"Endpoint {endpoint} is not a multi-model endpoint and does not support target model header.")
        return
    if target_model is None:
        # SageMaker's words (quoted in github.com/aws/sagemaker-tensorflow-serving-container issue 166).
        raise InvalidInvocation(f"Request {request_id} is missing a target model header.")
    if model_path(Path(models.folder), target_model) is None:
        raise InvalidInvocation(unknown_target(models.url, target_model))


def unknown_target(url: str, target_model: str) -> str:
    """SageMaker's answer for a TargetModel with no object under the prefix (as users report it); for a local
    prefix, the same sentence about the path."""
    parsed = urlparse(url)
    if parsed.scheme == "s3":
        key = f"{parsed.path.strip('/')}/{target_model}".lstrip("/")
        return (f"Failed to download model data(bucket: {parsed.netloc}, key: {key}). Please ensure that there is an "
                "object located at the URL and that the role passed to CreateModel has permissions to download the "
                "model.")
    folder = parsed.path if parsed.scheme == "file" else url
    return (f"Failed to download model data(path: {folder.rstrip('/')}/{target_model}). Please ensure that there is "
            "a model (a .gguf file or a model.tar.gz holding one) at that path under the endpoint's ModelDataUrl.")
