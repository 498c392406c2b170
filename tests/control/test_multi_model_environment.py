"""A multi-model variant's copies are told to serve every model under their folder, with the cache setting and
the memory their models may take."""

from __future__ import annotations

from typing import Any

import pytest

from pier.control.multi_model_environment import multi_model_environment
from pier.control.shapes import ContainerSpec

CASES = [
    # (name, container, expected environment)
    ("single model untouched", {"Environment": {"A": "1"}}, {"A": "1"}),
    ("SingleModel untouched", {"Mode": "SingleModel"}, {}),
    ("multi-model", {"Mode": "MultiModel"},
     {"SAGEMAKER_MULTI_MODEL": "true", "PIER_MODEL_CACHE": "Enabled", "PIER_MULTI_MODEL_MEMORY_MB": "2048"}),
    ("cache disabled", {"Mode": "MultiModel", "MultiModelConfig": {"ModelCacheSetting": "Disabled"}},
     {"SAGEMAKER_MULTI_MODEL": "true", "PIER_MODEL_CACHE": "Disabled", "PIER_MULTI_MODEL_MEMORY_MB": "2048"}),
    ("the user's memory wins", {"Mode": "MultiModel", "Environment": {"PIER_MULTI_MODEL_MEMORY_MB": "3.5"}},
     {"SAGEMAKER_MULTI_MODEL": "true", "PIER_MODEL_CACHE": "Enabled", "PIER_MULTI_MODEL_MEMORY_MB": "3.5"}),
]


@pytest.mark.parametrize(("name", "container", "expected"), CASES, ids=[c[0] for c in CASES])
def test_multi_model_environment(name: str, container: dict[str, Any], expected: dict[str, str]) -> None:
    assert multi_model_environment(ContainerSpec(ModelDataUrl="s3://b/p/", **container), 2048) == expected
