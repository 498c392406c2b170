"""botocore's own service model as the oracle for what pier's control plane returns: every required member
present, every value of the modelled type (botocore parses leniently, so a missing member would only show up
later, in a user's KeyError)."""

from __future__ import annotations

from typing import Any

import botocore.session
from botocore.model import Shape

from pier.control.instance_types import catalogue

_MODEL = botocore.session.get_session().get_service_model("sagemaker")
# pier's own instance types (`local` = this host) beside AWS's: botocore never checks enums on the way in.
_EXTRA_ENUM = {"ProductionVariantInstanceType": {"local", *catalogue()}}


def output_problems(operation: str, body: Any) -> list[str]:
    shape = _MODEL.operation_model(operation).output_shape
    problems: list[str] = []
    if shape is not None:
        _check(shape, body, operation, problems)
    return problems


def _check(shape: Shape, value: Any, path: str, problems: list[str]) -> None:
    kind = shape.type_name
    if kind == "structure":
        if not isinstance(value, dict):
            problems.append(f"{path}: expected an object, got {value!r}")
            return
        problems += [f"{path}.{name} is required but missing" for name in shape.required_members
                     if name not in value]
        for name, member in value.items():
            if name in shape.members:
                _check(shape.members[name], member, f"{path}.{name}", problems)
    elif kind == "list":
        if not isinstance(value, list):
            problems.append(f"{path}: expected a list, got {value!r}")
            return
        for i, item in enumerate(value):
            _check(shape.member, item, f"{path}[{i}]", problems)
    elif kind == "map":
        if not isinstance(value, dict):
            problems.append(f"{path}: expected a map, got {value!r}")
            return
        for key, item in value.items():
            _check(shape.value, item, f"{path}[{key}]", problems)
    elif kind == "string":
        if not isinstance(value, str):
            problems.append(f"{path}: expected a string, got {value!r}")
        elif shape.enum and value not in shape.enum and value not in _EXTRA_ENUM.get(shape.name, ()):
            problems.append(f"{path}: {value!r} is not one of {shape.enum}")
    elif kind in ("integer", "long"):
        if not isinstance(value, int) or isinstance(value, bool):
            problems.append(f"{path}: expected an integer, got {value!r}")
    elif kind in ("float", "double", "timestamp"):
        if not isinstance(value, int | float) or isinstance(value, bool):
            problems.append(f"{path}: expected a number (timestamps are epoch seconds), got {value!r}")
    elif kind == "boolean" and not isinstance(value, bool):
        problems.append(f"{path}: expected a boolean, got {value!r}")
