"""The SageMaker control plane as an OpenAPI document, made from botocore's model, so schemathesis can fuzz it.

The control plane is one route (`POST /` with `X-Amz-Target: SageMaker.<Operation>`), which OpenAPI cannot
describe per operation; `ControlPaths` gives each operation a path of its own (`POST /control/<Operation>`) and
turns it back into the real request before the gateway sees it.
"""

from __future__ import annotations

from typing import Any

import botocore.session

from pier.control.request_limits import OPEN_ENUMS, PATTERNED

PREFIX = "/control/"
MAX_NESTING = 3  # deeper members are any JSON: the fuzzer's time goes to what pier reads


def control_openapi(operations: tuple[str, ...]) -> dict[str, Any]:
    model = botocore.session.get_session().get_service_model("sagemaker")
    paths = {}
    for operation in operations:
        shape = model.operation_model(operation).input_shape
        paths[f"{PREFIX}{operation}"] = {"post": {
            "operationId": operation,
            "requestBody": {"required": True, "content": {"application/json": {"schema": _schema(shape, 0)}}},
            "responses": {"200": {"description": "done"}, "400": {"description": "AWS error"}},
        }}
    return {"openapi": "3.0.3", "info": {"title": "pier control plane", "version": "1"}, "paths": paths}


def _schema(shape: Any, depth: int) -> dict[str, Any]:
    meta = shape.metadata
    kind = shape.type_name
    if depth > MAX_NESTING:
        return {}
    if kind == "structure":
        schema: dict[str, Any] = {"type": "object", "properties": {
            name: _schema(member, depth + 1) for name, member in shape.members.items()}}
        if shape.required_members:
            schema["required"] = list(shape.required_members)
        return schema
    if kind == "list":
        schema = {"type": "array", "items": _schema(shape.member, depth + 1)}
        _bounds(schema, meta, "minItems", "maxItems")
        return schema
    if kind == "map":
        schema = {"type": "object", "additionalProperties": _schema(shape.value, depth + 1)}
        _bounds(schema, meta, "minProperties", "maxProperties")
        return schema
    if kind == "string":
        schema = {"type": "string"}
        if shape.enum and shape.name not in OPEN_ENUMS:
            schema["enum"] = list(shape.enum)
        _bounds(schema, meta, "minLength", "maxLength")
        if shape.name in PATTERNED and "pattern" in meta:
            schema["pattern"] = f"^{meta['pattern']}$"
        return schema
    if kind in ("integer", "long"):
        schema = {"type": "integer"}
        _bounds(schema, meta, "minimum", "maximum")
        return schema
    if kind in ("float", "double", "timestamp"):
        schema = {"type": "number"}
        _bounds(schema, meta, "minimum", "maximum")
        return schema
    if kind == "boolean":
        return {"type": "boolean"}
    return {}


def _bounds(schema: dict[str, Any], meta: dict[str, Any], low: str, high: str) -> None:
    if "min" in meta:
        schema[low] = meta["min"]
    if "max" in meta:
        schema[high] = meta["max"]


class ControlPaths:
    """ASGI middleware: `POST /control/<Operation>` becomes `POST /` with `X-Amz-Target: SageMaker.<Operation>`."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith(PREFIX):
            operation = scope["path"][len(PREFIX):]
            headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"x-amz-target"]
            scope = {**scope, "path": "/", "raw_path": b"/",
                     "headers": [*headers, (b"x-amz-target", f"SageMaker.{operation}".encode())]}
        await self.app(scope, receive, send)
