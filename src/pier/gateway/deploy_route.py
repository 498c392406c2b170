"""`POST /pier/deploy`: a deploy file's YAML (what `pier deploy FILE` reads), made real by the same SageMaker calls
`pier deploy` makes, run in the gateway's own control plane. For the web console, which cannot read the user's
files: relative model paths are read from the gateway's working folder.

It never waits. It does what can be done now and says what it waits for (components are created once their
endpoint is InService); the file's names come from its content, so the caller sends the same file again until
`waiting` is null, as `pier deploy` would have waited."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from pier.client.deploy_file import (
    Calls,
    DeployFileError,
    calls,
    component_changed,
    deployment_refusal,
    parse,
    update_input,
)
from pier.control.errors import ControlError, ValidationError
from pier.control.names import region_of
from pier.control.records import IN_PROGRESS
from pier.dialect import Dialect
from pier.error_bodies import render
from pier.errors import PierError
from pier.gateway.body import read_body
from pier.gateway.parts import gateway_of

log = logging.getLogger("pier.gateway")

Call = Callable[[str, dict[str, Any]], dict[str, Any]]
SOURCE = "The deploy file"


async def deploy_route(request: Request) -> Response:
    region = region_of(request.headers.get("authorization"))
    control = gateway_of(request).control

    def deploy(text: str) -> tuple[Calls, tuple[list[str], str | None]]:  # on the writer thread: it writes state
        try:
            todo = calls(parse(text, SOURCE), Path.cwd())
        except DeployFileError as error:
            raise ValidationError(str(error)) from None
        if (refusal := deployment_refusal(todo)) is not None:  # before anything is made, as `pier deploy` does
            raise ValidationError(refusal)
        return todo, converge(lambda operation, body: control.call(operation, body, region), todo)

    try:
        text = (await read_body(request)).decode("utf-8", errors="replace")
        todo, (steps, waiting) = await gateway_of(request).writer.run(deploy, text)
    except ControlError as error:
        return render(error, Dialect.CONTROL).response()
    except Exception as error:
        log.exception("deploy from the console failed")
        message = f"Internal error in pier ({type(error).__name__}: {error}); please report it. Retrying may work."
        return render(PierError(message), Dialect.CONTROL).response()
    return JSONResponse({"endpoint": todo.endpoint["EndpointName"], "steps": steps, "waiting": waiting})


def converge(call: Call, todo: Calls) -> tuple[list[str], str | None]:
    """The calls still needed to make the endpoint what the file says; (what was done, what it waits for)."""
    steps: list[str] = []
    for model in todo.models:
        _create_unless_exists(call, "CreateModel", model, f"model {model['ModelName']}", steps)
    config = todo.config["EndpointConfigName"]
    _create_unless_exists(call, "CreateEndpointConfig", todo.config, f"endpoint config {config}", steps)
    name = todo.endpoint["EndpointName"]
    current = _describe(call, "DescribeEndpoint", {"EndpointName": name})
    if current is None:
        call("CreateEndpoint", todo.endpoint)
        return [*steps, f"creating endpoint {name}"], f"endpoint {name} is Creating"
    status = current["EndpointStatus"]
    if status in IN_PROGRESS:
        return steps, f"endpoint {name} is {status}"
    if current["EndpointConfigName"] != config:  # moved as the file's `deployment` says (SageMaker's DeploymentConfig)
        call("UpdateEndpoint", update_input(todo))
        return [*steps, f"updating endpoint {name} to {config}"], f"endpoint {name} is Updating"
    if status != "InService":
        raise ValidationError(
            f"Endpoint {name} is {status}: {current.get('FailureReason') or 'no reason given'}. Fix what the reason "
            f"says, then deploy a changed file (it updates the endpoint) or delete the endpoint and deploy again.")
    return steps + _converge_components(call, name, todo), None


def _converge_components(call: Call, endpoint: str, todo: Calls) -> list[str]:
    listed = call("ListInferenceComponents", {"EndpointNameEquals": endpoint, "MaxResults": 100})
    existing = {c["InferenceComponentName"] for c in listed["InferenceComponents"]}
    steps = []
    for wanted in todo.components:
        name = wanted["InferenceComponentName"]
        if name not in existing:
            call("CreateInferenceComponent", wanted)
            steps.append(f"creating inference component {name}")
            continue
        described = call("DescribeInferenceComponent", {"InferenceComponentName": name})
        if component_changed(described, wanted):
            call("UpdateInferenceComponent", {"InferenceComponentName": name,
                                              **{k: wanted[k] for k in ("Specification", "RuntimeConfig")}})
            steps.append(f"updating inference component {name}")
    for name in sorted(existing - {c["InferenceComponentName"] for c in todo.components}):
        call("DeleteInferenceComponent", {"InferenceComponentName": name})
        steps.append(f"deleting inference component {name} (not in the file)")
    return steps


def _create_unless_exists(call: Call, operation: str, body: dict[str, Any], what: str, steps: list[str]) -> None:
    try:
        call(operation, body)
        steps.append(f"created {what}")
    except ValidationError as error:
        if "already existing" not in error.message:
            raise


def _describe(call: Call, operation: str, body: dict[str, Any]) -> dict[str, Any] | None:
    try:
        return call(operation, body)
    except ValidationError as error:
        if "Could not find" in error.message:
            return None
        raise

