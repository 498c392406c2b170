"""Where the model to serve is: a GGUF for pier's engine, or a folder that brings its own inference.py."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pier.server.byoc.location import HandlerScript
    from pier.server.settings import HandlerSettings

log = logging.getLogger("pier.server")

_SHARD = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")


class ModelNotFound(FileNotFoundError):
    """No servable model where the settings point; the message says where pier looked and what to do."""


@dataclass(frozen=True)
class ModelLocation:
    model_dir: Path  # the model folder (a .gguf file's own folder when given a file)
    gguf: Path | None = None  # served on pier's engine
    handler: HandlerScript | None = None  # the model's own inference.py, run instead of the engine

    @property
    def name(self) -> str:
        return (self.gguf or self.model_dir).name


def locate_model(source: str | Path, handler: HandlerSettings | None = None) -> ModelLocation:
    """A .gguf file is served as is. A folder whose handler script is where SageMaker's containers look for
    one (SAGEMAKER_SUBMIT_DIRECTORY, code/, the folder's root) runs that code; otherwise the folder's one GGUF
    is served. A SAGEMAKER_PROGRAM found nowhere is not fatal while there is a GGUF to serve: images built
    for llama.cpp set it for a server of their own."""
    path = Path(source)
    if path.is_file():
        if path.suffix != ".gguf":
            raise ModelNotFound(f"{path} is not a .gguf file: pass a GGUF model file or the folder holding one.")
        return ModelLocation(model_dir=path.parent, gguf=path)
    if not path.is_dir():
        raise ModelNotFound(
            f"No model at {path}: mount the model folder at /opt/ml/model, set SM_MODEL_DIR or HF_MODEL_ID "
            "to a local folder, or pass --model with a folder or a .gguf file."
        )
    from pier.server.byoc.location import search_handler  # only needed for folders; it has heavier imports

    search = search_handler(path, handler)
    if search.script is not None:
        log.info("running the model's own %s (found in %s)", search.script.path, search.script.found_by)
        return ModelLocation(model_dir=path, handler=search.script)
    try:
        gguf = find_gguf(path)
    except ModelNotFound as error:
        if search.named:
            raise ModelNotFound(
                f"SAGEMAKER_PROGRAM={search.program} names a handler script that is not in the model data "
                f"({search.missing()}), and there is no GGUF model to serve instead: {error}"
            ) from None
        raise
    if search.named:
        log.warning(
            "SAGEMAKER_PROGRAM=%s is not in the model data (%s); serving %s on pier's engine instead, with the "
            "SageMaker, TGI and OpenAI APIs", search.program, search.missing(), gguf.relative_to(path))
    return ModelLocation(model_dir=path, gguf=gguf)


def find_gguf(folder: Path) -> Path:
    """The folder's one model GGUF: split models count by their first shard; projector files
    (mmproj-*.gguf, for images) are not models on their own."""
    found = sorted(
        p for p in folder.rglob("*.gguf")
        if not p.name.startswith("mmproj") and _shard_index(p) in (None, 1)
    )
    if not found and (folder / "config.json").is_file() and any(folder.glob("*.safetensors")):
        raise ModelNotFound(
            f"{folder} holds a Hugging Face checkpoint (config.json, safetensors), not a GGUF: serve it through the "
            f"gateway (pier serve {folder}, or as an endpoint's model data), which converts it to GGUF once "
            "(pip install \"pier[hf]\"; docs/models.md)."
        )
    if not found:
        raise ModelNotFound(
            f"No .gguf file in {folder}: put the model's GGUF there (or a code/inference.py to run your own "
            "code), or pass --model with the .gguf file."
        )
    if len(found) > 1:
        names = ", ".join(str(p.relative_to(folder)) for p in found)
        raise ModelNotFound(
            f"{folder} holds {len(found)} GGUF models ({names}); keep one there or pass --model with the file "
            "to serve."
        )
    return found[0]


def _shard_index(path: Path) -> int | None:
    match = _SHARD.search(path.name)
    return int(match.group(1)) if match else None
