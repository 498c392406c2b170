"""A multi-model variant (`PrimaryContainer.Mode: MultiModel`) as its copies run it: the environment that makes a
copy serve every model under its ModelDataUrl prefix by name (pier.server.multi_model), with the cache setting
and the memory its models may take."""

from __future__ import annotations

from pier.control.shapes import ContainerSpec
from pier.multi_model import CACHE_ENV, MEMORY_ENV, MULTI_MODEL_ENV


def multi_model_environment(container: ContainerSpec, memory_mb: int) -> dict[str, str]:
    """The container's Environment, plus what a multi-model copy needs; a single-model container's as it is. The
    models' memory is the copy's (its instance's) unless the Environment sets PIER_MULTI_MODEL_MEMORY_MB."""
    environment = dict(container.Environment)
    if not container.multi_model:
        return environment
    config = container.MultiModelConfig
    environment[MULTI_MODEL_ENV] = "true"  # what SageMaker sets in a multi-model endpoint's containers
    environment[CACHE_ENV] = (config.ModelCacheSetting if config else None) or "Enabled"
    environment.setdefault(MEMORY_ENV, str(memory_mb))
    return environment
