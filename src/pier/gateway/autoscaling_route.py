"""Application Auto Scaling and CloudWatch at the gateway's address, as boto3 calls them (pier.autoscaling.wire
has the protocols): `POST /` with `X-Amz-Target: AnyScaleFrontendService.<Op>` (JSON 1.1) or
`GraniteServiceVersion20100801.<Op>` (JSON 1.0), which the control route hands here, and
`POST /service/GraniteServiceVersion20100801/operation/<Op>` (Smithy RPC v2 CBOR). Errors take each protocol's
shape; CloudWatch's carry `x-amzn-query-error` for the query-compatible code boto3 raises."""

from __future__ import annotations

import logging
import uuid
from urllib.parse import parse_qs

from fastapi import Request
from fastapi.responses import Response

from pier.autoscaling import query, wire
from pier.autoscaling.errors import ScalingError, ScalingValidation, UnknownOperation
from pier.control.errors import ControlError
from pier.control.names import region_of
from pier.dialect import AUTOSCALING_TARGET, CLOUDWATCH_TARGET, Dialect
from pier.error_bodies import render
from pier.errors import PierError
from pier.gateway.body import decoded, read_body
from pier.gateway.parts import gateway_of
from pier.state_folder.errors import StateUnavailable

log = logging.getLogger("pier.gateway")
REQUEST_ID = "x-amzn-RequestId"


async def answer(request: Request, service: str, operation: str, protocol: wire.Protocol) -> Response:
    """One call of `service` (its X-Amz-Target prefix) in `protocol`."""
    request_id = str(uuid.uuid4())
    headers = {REQUEST_ID: request_id}
    if protocol is wire.CBOR:
        headers["smithy-protocol"] = "rpc-v2-cbor"
    try:
        raw, encoding = await _body(request), request.headers.get("content-encoding", "")
        region = region_of(request.headers.get("authorization"))
        gateway = gateway_of(request)
        parts = gateway.autoscaling
        api = parts.application_autoscaling if service == AUTOSCALING_TARGET else parts.cloudwatch

        def call() -> bytes:  # on the writer thread: decoding, botocore's checks, SQLite and aggregation
            body = wire.check(wire.SERVICES[service], operation, protocol.decode(_decoded(raw, encoding)))
            reply = api.call(operation, body, region)
            return protocol.encode(reply, wire.output_shape(wire.SERVICES[service], operation))

        content = await gateway.writer.run(call)
        return Response(content, media_type=protocol.media_type, headers=headers)
    except ScalingError as error:
        content, more = protocol.error(error)
        return Response(content, error.wire.sagemaker_status, headers={**headers, **more},
                        media_type=protocol.media_type)
    except Exception as error:
        if isinstance(error, StateUnavailable):  # the database restarts: 503, and a later request connects again
            log.warning("%s.%s failed: %s", service, operation, error)
            failure: PierError = error
        else:
            log.exception("%s.%s failed", service, operation)
            failure = PierError(f"Internal error in pier ({type(error).__name__}: {error}); please report it.")
        answer = render(failure, Dialect.CONTROL)
        return Response(protocol.encode(answer.body), answer.status, headers=headers, media_type=protocol.media_type)


def is_query(request: Request) -> bool:
    """CloudWatch's query protocol: a form-encoded POST / with no X-Amz-Target."""
    content_type = request.headers.get("content-type", "")
    return "x-amz-target" not in request.headers and content_type.startswith("application/x-www-form-urlencoded")


async def query_route(request: Request) -> Response:
    """CloudWatch in the AWS query protocol (older botocore), answered in XML."""
    request_id = str(uuid.uuid4())
    headers = {REQUEST_ID: request_id}
    operation = "?"
    try:
        raw, encoding = await _body(request), request.headers.get("content-encoding", "")
        region = region_of(request.headers.get("authorization"))
        gateway = gateway_of(request)

        def call() -> bytes:  # on the writer thread, as the JSON and CBOR protocols' calls
            nonlocal operation
            form = {k: v[-1] for k, v in parse_qs(_decoded(raw, encoding).decode("utf-8", "replace"),
                                                   keep_blank_values=True).items()}
            operation = form.pop("Action", "")
            if form.pop("Version", "") != query.VERSION:
                raise UnknownOperation(f"pier serves the query protocol for CloudWatch (Version {query.VERSION}) "
                                       "only.")
            model = wire.service_model("cloudwatch")
            if operation not in model.operation_names:
                raise UnknownOperation(f"CloudWatch has no operation {operation!r}.")
            shapes = model.operation_model(operation)
            body = wire.check("cloudwatch", operation, query.parse(form, shapes.input_shape))
            reply = gateway.autoscaling.cloudwatch.call(operation, body, region)
            return query.answer(operation, reply, shapes.output_shape, request_id)

        return Response(await gateway.writer.run(call), headers=headers, media_type=query.MEDIA_TYPE)
    except ScalingError as error:
        return Response(query.error(error, request_id), error.wire.sagemaker_status, headers=headers,
                        media_type=query.MEDIA_TYPE)
    except (ValueError, UnicodeError) as error:
        failure = ScalingValidation(f"The form does not read as {operation}'s parameters ({error}).")
        return Response(query.error(failure, request_id), 400, headers=headers, media_type=query.MEDIA_TYPE)


async def cbor_route(operation: str, request: Request) -> Response:
    """CloudWatch in Smithy RPC v2 CBOR."""
    return await answer(request, CLOUDWATCH_TARGET, operation, wire.CBOR)


async def _body(request: Request) -> bytes:
    """The body, within the control plane's limit; too large is this API's own ValidationException."""
    try:
        return await read_body(request)
    except ControlError as error:
        raise ScalingValidation(error.message) from None


def _decoded(raw: bytes, encoding: str) -> bytes:
    """The body as sent before its Content-Encoding (botocore gzips PutMetricData past 10 KB)."""
    try:
        return decoded(raw, encoding)
    except ControlError as error:
        raise ScalingValidation(error.message) from None
