"""The SageMaker control plane's one route: `POST /` with `X-Amz-Target: SageMaker.<Operation>` and a JSON 1.1
body, answered in AWS JSON 1.1 with `x-amzn-RequestId` (errors as `{"__type", "message"}`). Application Auto
Scaling's and CloudWatch's targets go to pier.gateway.autoscaling_route."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from pier.autoscaling import wire
from pier.control.errors import ControlError, UnknownOperation
from pier.control.names import region_of
from pier.control.request_limits import check_request, parse_body
from pier.dialect import AUTOSCALING_TARGET, CLOUDWATCH_TARGET, Dialect
from pier.error_bodies import AMZ_JSON, AMZ_REQUEST_ID, render
from pier.errors import PierError
from pier.gateway import autoscaling_route
from pier.gateway.body import decoded, read_body
from pier.gateway.parts import gateway_of
from pier.state_folder.errors import StateUnavailable
from pier.transform.service import OPERATIONS as TRANSFORM_OPERATIONS

log = logging.getLogger("pier.gateway")


async def control_route(request: Request) -> Response:
    service, _, operation = request.headers.get("x-amz-target", "").partition(".")
    if service in wire.SERVICES:  # Application Auto Scaling (JSON 1.1) or CloudWatch (JSON 1.0)
        protocol = wire.JSON_1_1 if service == AUTOSCALING_TARGET else wire.JSON_1_0
        return await autoscaling_route.answer(request, service, operation, protocol)
    if autoscaling_route.is_query(request):  # CloudWatch as older botocore calls it
        return await autoscaling_route.query_route(request)
    request_id = str(uuid.uuid4())
    try:
        operation = _operation(request.headers.get("x-amz-target", ""))
        raw, encoding = await read_body(request), request.headers.get("content-encoding", "")
        region = region_of(request.headers.get("authorization"))
        gateway = gateway_of(request)

        def call() -> dict[str, Any]:  # on the writer thread: parsing and SQLite stay off the event loop
            body = parse_body(decoded(raw, encoding))
            if operation in TRANSFORM_OPERATIONS and gateway.transforms is not None:
                check_request(operation, body)
                return gateway.transforms.call(operation, body, region)
            return gateway.control.call(operation, body, region)

        reply = await gateway.writer.run(call)
        return JSONResponse(reply, headers={AMZ_REQUEST_ID: request_id}, media_type=AMZ_JSON)
    except ControlError as error:
        return render(error, Dialect.CONTROL, request_id).response()
    except StateUnavailable as error:  # the database restarts: 503, and a later request connects again
        log.warning("control plane request failed: %s", error)
        return render(error, Dialect.CONTROL, request_id).response()
    except Exception as error:
        log.exception("control plane request failed")
        message = f"Internal error in pier ({type(error).__name__}: {error}); please report it. Retrying may work."
        return render(PierError(message), Dialect.CONTROL, request_id).response()


def _operation(target: str) -> str:
    service, _, operation = target.partition(".")
    if service != "SageMaker" or not operation:
        raise UnknownOperation(
            f"pier serves the SageMaker API at POST / with X-Amz-Target: SageMaker.<Operation> (and "
            f"{AUTOSCALING_TARGET}.<Operation>, {CLOUDWATCH_TARGET}.<Operation>); got {target!r}."
        )
    return operation
