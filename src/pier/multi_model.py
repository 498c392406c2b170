"""What a multi-model copy and the gateway tell each other about its models (SageMaker's `Mode: MultiModel`).

The gateway names the model with SageMaker's own header (`TARGET_MODEL_HEADER`, as SageMaker passes it to a
container); the copy answers with how it found the model (`CacheReport`, in headers of its answer), which the
gateway turns into the AWS/SageMaker metrics ModelCacheHit, ModelLoadingWaitTime, LoadedModelCount,
ModelUnloadingTime and ModelDownloadingTime, and into which models the copy holds (the router sends a target to
a copy that holds it). Like `pier.channel`, it imports nothing of pier but `pier.host_path` (where a target's file
is): the server and the runtime share it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pier import host_path
from pier.channel.headers import LOADED_MODELS as _LOADED
from pier.channel.headers import MODEL_CACHE_HIT as _HIT
from pier.channel.headers import MODEL_DOWNLOADING as _DOWNLOAD
from pier.channel.headers import MODEL_LOADING_WAIT as _WAIT
from pier.channel.headers import MODEL_UNLOADING as _UNLOAD

TARGET_MODEL_HEADER = "X-Amzn-SageMaker-Target-Model"
MULTI_MODEL_ENV = "SAGEMAKER_MULTI_MODEL"  # "true": the copy serves every model under its model folder by name
CACHE_ENV = "PIER_MODEL_CACHE"  # MultiModelConfig.ModelCacheSetting: Enabled (default) or Disabled
MEMORY_ENV = "PIER_MULTI_MODEL_MEMORY_MB"  # what the copy's loaded models may take (MB, decimals allowed)



ARCHIVES = (".tar.gz", ".tgz", ".tar")


def model_path(root: Path, name: str) -> Path | None:
    """The model file a target names under `root` (a GGUF or an archive, by a path relative to it, as SageMaker
    joins TargetModel to the ModelDataUrl prefix); None when there is none or the name would leave `root`."""
    # S3 keys are literal: "./m.gguf" or "a//m.gguf" is no object there, and taken here as "m.gguf" it would be
    # the same file loaded once per spelling (the copy's cache goes by name).
    if not name or "/".join(PurePosixPath(name).parts) != name:
        return None
    if not (name.endswith(".gguf") or name.lower().endswith(ARCHIVES)):
        return None
    try:
        path = host_path.under(root, name)
    except host_path.PathRefused:
        return None
    try:
        return path if path.is_file() else None
    except OSError:  # a part longer than the file system allows (ENAMETOOLONG): no such model either
        return None


def is_multi_model(environment: Mapping[str, str]) -> bool:
    return environment.get(MULTI_MODEL_ENV, "").strip().lower() == "true"


@dataclass(frozen=True)
class CacheReport:
    """How one invocation found its model on the copy."""

    hit: bool  # it was loaded already
    wait_us: int = 0  # how long the request waited for the model (download, unloads, load)
    unload_us: int = 0  # unloading the models evicted to make room
    download_us: int = 0  # bringing its files into place (unpacking a model.tar.gz)
    loaded: tuple[str, ...] = ()  # the copy's models after the answer

    def headers(self) -> dict[str, str]:
        return {_HIT: "1" if self.hit else "0", _WAIT: str(self.wait_us), _UNLOAD: str(self.unload_us),
                _DOWNLOAD: str(self.download_us), _LOADED: ",".join(self.loaded)}

    @classmethod
    def of(cls, headers: Mapping[str, str]) -> CacheReport | None:
        """The report in an answer's headers; None when the answer has none (not a multi-model copy)."""
        hit = headers.get(_HIT)
        if hit is None:
            return None
        loaded = headers.get(_LOADED, "")
        return cls(hit == "1", _int(headers.get(_WAIT)), _int(headers.get(_UNLOAD)), _int(headers.get(_DOWNLOAD)),
                   tuple(name for name in loaded.split(",") if name))


def _int(value: str | None) -> int:
    return int(value) if value is not None and value.isdigit() else 0
