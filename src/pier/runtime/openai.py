"""OpenAI passthrough: /v1/chat/completions, /v1/completions, /v1/responses, /v1/embeddings (and, under an
endpoint, GET /v1/models and llama-server's /tokenize, /detokenize, /apply-template) forwarded to a copy
unchanged, with the name of what was called (the component, else the endpoint) in MODEL_NAME_HEADER for the
answer's `model`.

The copy speaks OpenAI itself, so its answers, errors included, pass through as they are. Errors the
gateway raises (no copy ready, a full queue or a full copy: 429 with Retry-After, a broken stream) take OpenAI's
shape; after a stream has begun, as its last `data:` event, followed by `data: [DONE]` as a stream's end always
is (a Responses stream's, as its `error` event).

Which endpoint and inference component a request is for, by route:
- `/endpoints/E/openai/v1/...` and `/endpoints/E/inference-components/IC/openai/v1/...`: SageMaker's own
  OpenAI-compatible paths, with its rules: the component is named in the path (an endpoint that hosts components
  needs it, one that serves its model directly refuses it) and never by the Inference-Component header.
- `/endpoints/E/v1/...`: pier's; the component from the X-Amzn-SageMaker-Inference-Component header, under the
  same rules as InvokeEndpoint.
- `/v1/...`: pier's; the body's `model` is "ENDPOINT", "ENDPOINT/INFERENCE_COMPONENT" or an inference component's
  own name, the header winning; "ENDPOINT" alone is refused for an endpoint that hosts components, as InvokeEndpoint
  without InferenceComponentName is, so nothing works here that would not work on SageMaker.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncGenerator, Awaitable, Iterator
from contextlib import AsyncExitStack, contextmanager
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive

from pier.channel.headers import MODEL_NAME_HEADER
from pier.channel.prefix import content_text, request_prefix
from pier.deadline import StreamClock
from pier.dialect import Dialect
from pier.error_bodies import render
from pier.errors import CLIENT_CLOSED_REQUEST, ClientGone
from pier.runtime.attempts import Answer, Call, Forwarder, StreamEnded, answer_of
from pier.runtime.disconnect import unless_disconnected
from pier.runtime.errors import (
    ComponentRequired,
    EndpointNotFound,
    InvalidInvocation,
    as_invocation_error,
    openai_error,
)
from pier.runtime.invocation import (
    COMPONENT,
    ENDPOINT,
    INFERENCE_COMPONENT,
    TARGET_VARIANT,
    VARIANT,
    check_member,
    read_body,
)
from pier.runtime.routing_strategy import request_routing
from pier.runtime.streaming import ClosingStream
from pier.runtime.target import Resolve, Target, resolve_target

REQUEST_ID = "x-request-id"
RESPONSES = "/v1/responses"  # OpenAI's Responses API: its streams end in their own way


class OpenAIBody(BaseModel):
    """What the gateway reads of the body; the copy validates the rest."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    stream: bool | None = False  # null: no stream, as OpenAI reads it


async def passthrough(forwarder: Forwarder, resolve: Resolve, request: Request, path: str,
                      endpoint: str | None = None, *, sagemaker_path: bool = False, component: str | None = None
                      ) -> Response:
    """`sagemaker_path`: the request came by SageMaker's OpenAI-compatible path, which names the component (if
    any) as `component`."""
    request_id = str(uuid.uuid4())
    received = asyncio.get_running_loop().time()
    try:
        body = await read_body(request, forwarder.settings.max_payload_bytes)
        parsed = _parse(body) if request.method == "POST" else OpenAIBody()
        header = request.headers.get(INFERENCE_COMPONENT)
        if sagemaker_path:
            if header is not None:
                # pier's words: SageMaker refuses the header on this path, in words not known.
                raise InvalidInvocation(
                    "The X-Amzn-SageMaker-Inference-Component header is not accepted on the OpenAI-compatible path: "
                    "name the inference component in the path, /endpoints/ENDPOINT/inference-components/"
                    "INFERENCE_COMPONENT/openai/v1/..., and drop the header.")
            header = component
        variant = request.headers.get(TARGET_VARIANT)
        with _in_model(endpoint):
            name, component = _address(endpoint, parsed.model, header)
        if variant is not None:
            check_member(VARIANT, variant)

        def retarget() -> Awaitable[Target]:
            return resolve_target(resolve, name, component, variant)

        try:
            with _in_model(endpoint, EndpointNotFound):  # not the component's errors: SageMaker's words, exactly
                target = await retarget()
        except ComponentRequired as error:
            if sagemaker_path:  # the header SageMaker's words ask for is refused on this path
                raise InvalidInvocation(
                    f"{error.message} On this path, name it in the path: /endpoints/{name}/inference-components/"
                    "INFERENCE_COMPONENT/openai/v1/... (ListInferenceComponents shows what the endpoint hosts)."
                ) from None
            if endpoint is not None:
                raise
            raise InvalidInvocation(f"{error.message} On this route, name it in `model`: {name}/INFERENCE_COMPONENT "
                                    "(ListInferenceComponents shows what the endpoint hosts).") from None
        deadline_s = forwarder.settings.openai_deadline_s
        # the name answers carry when the body names none, and GET /v1/models lists (pier.served_name)
        headers = {"Content-Type": "application/json", "X-Request-Id": request_id, MODEL_NAME_HEADER: component or name,
                   **target.headers}
        route = request_routing(target.routing, content_text(body) if target.routing.prefix_aware else "")
        clock = None
        if parsed.stream and deadline_s is not None:  # a stream that keeps flowing is not cut (pier.deadline)
            clock = StreamClock(received, deadline_s, forwarder.settings.stream_total_s)
        call = Call(name, target, path, body, headers, request_prefix(body),
                    None if deadline_s is None else received + deadline_s, deadline_s, retarget=retarget, route=route,
                    method=request.method, stream=clock)
        if parsed.stream:
            return await _stream(forwarder, call, request_id, request.receive)
        return await unless_disconnected(_whole(forwarder, call, request_id), request.receive)
    except ClientGone:
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    except Exception as error:
        return openai_error(error, request_id)


def _parse(body: bytes) -> OpenAIBody:
    try:
        return OpenAIBody.model_validate_json(body)
    except PydanticValidationError as error:
        problem = error.errors(include_url=False)[0]
        where = ".".join(str(part) for part in problem["loc"]) or "body"
        raise InvalidInvocation(
            f"Invalid request body: `{where}`: {problem['msg']}. Send a JSON object with `model` set to the endpoint "
            "name."
        ) from None


@contextmanager
def _in_model(endpoint: str | None, kind: type[InvalidInvocation] = InvalidInvocation) -> Iterator[None]:
    """On /v1/ (no endpoint in the path) the body's `model` names what is called: a name that is malformed or not
    found is the fault of `model`, and the list of what may be called is where to look (the words stay
    SageMaker's, as InvokeEndpoint's, for code that matches them)."""
    try:
        yield
    except kind as error:
        if endpoint is None and error.param is None:
            error.param = "model"
            error.message += " GET /v1/models lists the endpoints and inference components you may name in `model`."
            error.args = (error.message,)
        raise


def _address(endpoint: str | None, model: str | None, component: str | None) -> tuple[str, str | None]:
    """The endpoint and inference component a request is for: the URL's endpoint, else `model` as
    "ENDPOINT" or "ENDPOINT/INFERENCE_COMPONENT"; the X-Amzn-SageMaker-Inference-Component header wins."""
    if endpoint is None:
        if not model:
            raise InvalidInvocation(
                "Set `model` to the name of the endpoint to call (or ENDPOINT/INFERENCE_COMPONENT)."
            )
        endpoint, _, named = model.partition("/")
        component = component or named or None
    check_member(ENDPOINT, endpoint)
    if component is not None:
        check_member(COMPONENT, component)
    return endpoint, component


async def _whole(forwarder: Forwarder, call: Call, request_id: str) -> Response:
    async with answer_of(forwarder, call) as answer:
        body = await answer.read()
        return Response(body, answer.head.status_code, _headers(answer, request_id))


async def _stream(forwarder: Forwarder, call: Call, request_id: str, receive: Receive) -> Response:
    resources = AsyncExitStack()
    try:
        answer = await unless_disconnected(resources.enter_async_context(answer_of(forwarder, call)), receive)
        if not answer.head.is_success:
            body = await answer.read()
            await resources.aclose()
            return Response(body, answer.head.status_code, _headers(answer, request_id))
    except BaseException:
        await resources.aclose()
        raise
    media_type = answer.head.headers.get("content-type", "text/event-stream")
    return ClosingStream(_events(answer, call.path), resources.aclose, headers=_headers(answer, request_id),
                         media_type=media_type)


async def _events(answer: Answer, path: str) -> AsyncGenerator[bytes, None]:
    tail = b"\n\n"
    try:
        async for chunk in answer.relay():
            tail = (tail + chunk)[-2:]
            yield chunk
    except Exception as error:
        failure = error.error if isinstance(error, StreamEnded) else as_invocation_error(error)
        separator = b"" if tail == b"\n\n" else b"\n\n"  # never glue the error onto a cut-off event
        yield separator + _error_event(render(failure, Dialect.OPENAI).body, path)


def _error_event(body: dict[str, Any], path: str) -> bytes:
    """The event that ends a broken stream: a Responses stream's `error` event (it has no [DONE]), else the
    error object and [DONE], as OpenAI's chat and completion streams end."""
    if path.endswith(RESPONSES):
        problem = body.get("error", {})
        event = {"type": "error", "code": problem.get("code"), "message": problem.get("message"),
                 "param": problem.get("param")}
        return b"event: error\ndata: " + json.dumps(event).encode() + b"\n\n"
    return b"data: " + json.dumps(body).encode() + b"\n\ndata: [DONE]\n\n"


def _headers(answer: Answer, request_id: str) -> dict[str, str]:
    headers = {REQUEST_ID: request_id}
    if "content-type" in answer.head.headers:
        headers["Content-Type"] = answer.head.headers["content-type"]
    return headers

