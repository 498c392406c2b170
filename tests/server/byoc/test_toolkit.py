"""The handler contract inside one worker, without processes: signature detection, defaults, context."""

from __future__ import annotations

import io
import json
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from pier.server.byoc.errors import HandlerError
from pier.server.byoc.toolkit import Context, Handler, handle, resolve, takes_context
from pier.server.byoc.worker_frames import WorkerReply, WorkerRequest


class CallableModel:
    def __call__(self, data: Any, model: Any, context: Any) -> Any:
        return data


def _plain(data: Any, model: Any) -> Any:
    return data


def _with_context(data: Any, model: Any, context: Any) -> Any:
    return data


def _optional_context(data: Any, model: Any, context: Any = None) -> Any:
    return data


def _varargs(*args: Any) -> Any:
    return args


@pytest.mark.parametrize(
    ("name", "func", "expected"),
    [
        ("predict_fn", _plain, False),
        ("predict_fn", _with_context, True),
        ("predict_fn", _optional_context, True),  # the toolkit passes context when there is room for it
        ("predict_fn", _varargs, True),
        ("predict_fn", CallableModel(), True),
        ("model_fn", lambda model_dir: None, False),
        ("model_fn", lambda model_dir, context: None, True),
        ("input_fn", lambda body, content_type: None, False),
        ("output_fn", lambda prediction, accept, context: None, True),
        ("transform_fn", lambda model, body, content_type, accept: None, False),
        ("transform_fn", lambda model, body, content_type, accept, context: None, True),
        ("model_warmup_fn", lambda model_dir, model: None, False),
    ],
)
def test_takes_context(name: str, func: Callable[..., Any], expected: bool) -> None:
    assert takes_context(name, func) is expected


@pytest.mark.parametrize(
    ("name", "func", "says"),
    [
        ("predict_fn", lambda data: None, "predict_fn must take (data, model) or (data, model, context)"),
        ("model_fn", lambda: None, "model_fn must take (model_dir)"),
        ("input_fn", lambda a, b, c, d: None, "input_fn must take (input_data, content_type)"),
        ("output_fn", lambda prediction, accept, *, level: None, "output_fn must take"),
    ],
)
def test_a_signature_that_fits_neither_form_is_refused(name: str, func: Callable[..., Any], says: str,
                                                       ) -> None:
    with pytest.raises(HandlerError) as caught:
        takes_context(name, func)
    assert says in caught.value.message


def load(**functions: Callable[..., Any]) -> Handler:
    module = types.ModuleType("inference")
    module.__dict__.update(functions)
    handler = Handler("/opt/ml/model", functions=resolve(module))
    handler.model = handler.functions["model_fn"](Context("/opt/ml/model"), "/opt/ml/model")
    return handler


def call(handler: Handler, body: bytes, content_type: str = "application/json", accept: str = "*/*",
         custom_attributes: str | None = None) -> WorkerReply:
    return handle(handler, WorkerRequest(body, content_type, accept, custom_attributes, "req-1"))


def test_defaults_decode_call_the_model_and_encode() -> None:
    handler = load(model_fn=lambda model_dir: (lambda data: data * 2))
    assert call(handler, b"[1, 2, 3]") == WorkerReply(body=b"[2, 4, 6]", content_type="application/json")
    csv = WorkerReply(body=b"2,4\n6,8\n", content_type="text/csv")
    assert call(handler, b"1,2\n3,4", "text/csv", "text/csv") == csv
    reply = call(handler, b"[1.5]", accept="application/x-npy")
    assert reply.content_type == "application/x-npy"
    np.testing.assert_array_equal(np.load(io.BytesIO(reply.body)), [3.0])


def test_default_accept_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT", "text/csv")
    handler = load(model_fn=lambda model_dir: (lambda data: data))
    assert call(handler, b"[1, 2]", accept="*/*") == WorkerReply(body=b"1\n2\n", content_type="text/csv")


@pytest.mark.parametrize(
    ("content_type", "accept", "status", "says"),
    [
        ("text/plain", "*/*", 415, "send one of application/json, text/csv, application/x-npy"),
        ("application/json", "text/html", 406, "ask for one of application/json, text/csv"),
        ("application/json", "*/*", 400, "not valid application/json"),
    ],
)
def test_defaults_answer_unsupported_types_with_their_status(
    content_type: str, accept: str, status: int, says: str
) -> None:
    handler = load(model_fn=lambda model_dir: (lambda data: data))
    body = b"{broken" if status == 400 else b"[1]"
    reply = call(handler, body, content_type, accept)
    assert reply.status == status
    assert says in reply.error


def test_input_fn_gets_text_for_json_and_csv_and_bytes_otherwise() -> None:
    handler = load(model_fn=lambda model_dir: None, input_fn=lambda body, content_type: type(body).__name__,
                   predict_fn=lambda data, model: data, output_fn=lambda prediction, accept: prediction)
    assert call(handler, b"{}", "application/json").body == b"str"
    assert call(handler, b"1", "text/csv").body == b"str"
    assert call(handler, b"\x00", "application/octet-stream").body == b"bytes"


def test_context_carries_model_dir_headers_and_custom_attributes() -> None:
    def predict_fn(data: Any, model: Any, context: Context) -> dict[str, Any]:
        headers = context.request_processor[0].get_request_properties()
        return {
            "model_dir": context.system_properties["model_dir"],
            "gpu_id": context.system_properties["gpu_id"],
            "attributes": context.get_request_header(0, "X-Amzn-SageMaker-Custom-Attributes"),
            "also": context.custom_attributes,
            "accept": headers.get("accept"),
            "content_type": headers["content-type"],
            "request_id": context.get_request_id(0),
        }

    handler = load(model_fn=lambda model_dir, context: {"loaded_in": context.system_properties["model_dir"]},
                   predict_fn=predict_fn)
    reply = call(handler, b"[]", accept="application/json", custom_attributes="trace=abc")
    assert json.loads(reply.body) == {
        "model_dir": "/opt/ml/model", "gpu_id": None, "attributes": "trace=abc", "also": "trace=abc",
        "accept": "application/json", "content_type": "application/json", "request_id": "req-1",
    }
    assert handler.model == {"loaded_in": "/opt/ml/model"}


def test_output_fn_may_return_body_alone_or_body_and_type() -> None:
    alone = load(model_fn=lambda d: None, predict_fn=lambda data, model: "hi", output_fn=lambda p, accept: p)
    assert call(alone, b"[]", accept="text/plain") == WorkerReply(body=b"hi", content_type="text/plain")
    both = load(model_fn=lambda d: None, predict_fn=lambda data, model: "hi",
                output_fn=lambda p, accept: (p.encode(), "text/x-greeting"))
    assert call(both, b"[]") == WorkerReply(body=b"hi", content_type="text/x-greeting")
    as_json = load(model_fn=lambda d: None, predict_fn=lambda data, model: {"a": 1}, output_fn=lambda p, a: p)
    json_reply = WorkerReply(body=b'{"a": 1}', content_type="application/json")
    assert call(as_json, b"[]", accept="text/plain") == json_reply


def test_a_raising_function_is_named_with_its_exception() -> None:
    def predict_fn(data: Any, model: Any) -> Any:
        raise ValueError("prompt is empty")

    reply = call(load(model_fn=lambda d: None, predict_fn=predict_fn), b"[]")
    assert reply.status == 500
    assert reply.error.startswith("predict_fn raised ValueError: prompt is empty")


def test_toolkit_style_errors_keep_their_status() -> None:
    class GenericInferenceToolkitError(Exception):
        def __init__(self, status_code: int, message: str) -> None:
            super().__init__(status_code, message)
            self.status_code = status_code
            self.message = message

    def input_fn(body: str, content_type: str) -> Any:
        raise GenericInferenceToolkitError(422, "temperature must be positive")

    reply = call(load(model_fn=lambda d: None, input_fn=input_fn), b"{}")
    assert reply.status == 422
    assert reply.error.startswith("input_fn raised GenericInferenceToolkitError: temperature must be")


def test_a_handler_may_set_an_error_status_through_context() -> None:
    def transform_fn(model: Any, body: str, content_type: str, accept: str, context: Context) -> str:
        context.set_response_status(400, "say please")
        return "ignored"

    reply = call(load(model_fn=lambda d: None, transform_fn=transform_fn), b"{}")
    assert (reply.status, reply.error) == (400, "say please")


def test_the_default_predict_fn_says_what_it_tried() -> None:
    reply = call(load(model_fn=lambda d: {"not": "callable"}), b"[1]")
    assert reply.status == 500
    assert "the default predict_fn raised TypeError" in reply.error


def test_transform_fn_cannot_be_mixed_with_the_pipeline() -> None:
    with pytest.raises(HandlerError, match="defines transform_fn and predict_fn"):
        load(model_fn=lambda d: None, transform_fn=lambda m, b, c, a: b, predict_fn=lambda d, m: d)


def test_a_missing_model_fn_is_reported_at_load() -> None:
    with pytest.raises(HandlerError) as caught:
        load(predict_fn=lambda data, model: data)
    assert "default model_fn raised NotImplementedError: inference.py has no model_fn" in caught.value.message
