"""Where a model folder's handler script is, as SageMaker's framework containers look for it."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from pier.server.byoc.errors import HandlerError

log = logging.getLogger("pier.server.byoc")

DEFAULT_PROGRAM = "inference.py"


def find_handler(model_dir: Path) -> Path | None:
    """The user's handler module: SAGEMAKER_PROGRAM (default inference.py) in SAGEMAKER_SUBMIT_DIRECTORY
    (default model_dir/code). None when the default is absent; an error when a named program is."""
    program = os.environ.get("SAGEMAKER_PROGRAM") or DEFAULT_PROGRAM
    if not program.endswith(".py"):
        program += ".py"
    path = _code_dir(model_dir) / program
    if path.is_file():
        return path
    if os.environ.get("SAGEMAKER_PROGRAM"):
        raise HandlerError(500, f"SAGEMAKER_PROGRAM names {program}, but there is no {path}; put the script "
                                f"there or unset SAGEMAKER_PROGRAM.")
    return None


def _code_dir(model_dir: Path) -> Path:
    submitted = os.environ.get("SAGEMAKER_SUBMIT_DIRECTORY")
    if submitted and Path(submitted).is_dir():
        return Path(submitted)
    if submitted:
        # The SageMaker SDK may name an S3 sourcedir.tar.gz here while also repacking the code into
        # model_dir/code, which is where the code is once the model has been fetched.
        log.warning("SAGEMAKER_SUBMIT_DIRECTORY=%s is not a folder; looking in %s/code", submitted, model_dir)
    return model_dir / "code"
