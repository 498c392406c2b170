"""InvokeEndpointAsync: `POST /endpoints/{EndpointName}/async-invocations`. The request (its InputLocation, or an
inline Body) is checked (pier.async_inference.accepted), queued in the state folder and answered at once with 202,
its InferenceId, and where its answer (OutputLocation) or its failure (FailureLocation) will be written;
pier.async_inference.dispatcher runs it.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from fastapi import Request
from starlette.responses import JSONResponse, Response

from pier.async_inference.accepted import FAILURE_LOCATION, OUTPUT_LOCATION, accepted
from pier.control.names import ACCOUNT
from pier.gateway.parts import gateway_of
from pier.runtime.errors import REQUEST_ID, EndpointNotFound, InvalidInvocation, sagemaker_error
from pier.runtime.invocation import read_body


async def invoke_endpoint_async(endpoint_name: str, request: Request) -> Response:
    request_id = str(uuid.uuid4())
    gateway = gateway_of(request)
    try:
        body = await read_body(request, gateway.runtime.settings.max_payload_bytes)
        record = gateway.state.endpoints.get(endpoint_name)
        if record is None or record.status == "Deleting":
            raise EndpointNotFound(endpoint_name, ACCOUNT)
        if record.async_inference is None:
            raise InvalidInvocation(
                f"Endpoint {endpoint_name} is not an asynchronous endpoint: call InvokeEndpoint, or give its endpoint "
                "config an AsyncInferenceConfig (CreateEndpointConfig) and UpdateEndpoint to it.")
        queued = accepted(endpoint_name, request.headers, body, record.async_inference, time.time())
        assert gateway.async_inference is not None, "the gateway runs asynchronous inference"
        await asyncio.to_thread(gateway.async_inference.queue.add, queued)
        gateway.async_inference.poke()
    except Exception as error:
        return sagemaker_error(error, request_id)
    return JSONResponse({"InferenceId": queued.inference_id}, 202, {
        OUTPUT_LOCATION: queued.output_location, FAILURE_LOCATION: queued.failure_location, REQUEST_ID: request_id})
