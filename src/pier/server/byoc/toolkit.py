"""SageMaker's inference-toolkit contract, as a handler worker runs it: the user's `model_fn / input_fn /
predict_fn / output_fn` (or `transform_fn`), each called with the optional trailing `context` when its signature
asks for it, the toolkit's defaults for the functions left out, and what a handler sees as `context`."""

from __future__ import annotations

import importlib
import inspect
import logging
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pier import __version__
from pier.env import Env
from pier.server.byoc import codecs
from pier.server.byoc.errors import HandlerError
from pier.server.byoc.worker_frames import WorkerReply, WorkerRequest

log = logging.getLogger("pier.handler")


class Headers(dict[str, str]):
    """Request headers that answer `get("accept")` and `get("Accept")` alike, as MMS's do."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        super().__init__(headers)
        self._lower = {key.lower(): value for key, value in headers.items()}

    def __getitem__(self, key: str) -> str:
        return self._lower[key.lower()]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._lower

    def get(self, key: str, default: Any = None) -> Any:
        return self._lower.get(key.lower(), default)


class RequestProcessor:
    """MMS's per-request view: `context.request_processor[0].get_request_properties()`."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        self._headers = Headers(headers)

    def get_request_properties(self) -> Headers:
        return self._headers

    def get_request_property(self, key: str) -> str | None:
        return self._headers.get(key)


class Context:
    """The `context` argument of model_fn, input_fn, predict_fn, output_fn and transform_fn.

    It carries the attributes of the MMS/TorchServe context that inference scripts use: system
    properties (model_dir, gpu_id), the request's headers (including the SageMaker custom
    attributes) and the response status, which a handler may set to answer with an error.
    """

    def __init__(self, model_dir: str, headers: Mapping[str, str] | None = None, request_id: str = "",
                 ) -> None:
        self.model_name = "model"
        self.manifest: dict[str, Any] = {"model": {"modelName": self.model_name}}
        self.metrics = None
        self.system_properties: dict[str, Any] = {
            "model_dir": model_dir, "gpu_id": None, "batch_size": 1,
            "server_name": "pier", "server_version": __version__, "limit_max_image_pixels": True,
        }
        self.request_ids = {0: request_id}
        self.request_processor = [RequestProcessor(headers or {})]
        self.response_status: tuple[int, str] | None = None

    @property
    def custom_attributes(self) -> str | None:
        return self.get_request_header(0, "X-Amzn-SageMaker-Custom-Attributes")

    def get_request_id(self, idx: int = 0) -> str:
        return self.request_ids[idx]

    def get_request_header(self, idx: int, key: str) -> str | None:
        return self.request_processor[idx].get_request_property(key)

    def get_all_request_header(self, idx: int) -> Headers:
        return self.request_processor[idx].get_request_properties()

    def set_response_status(self, code: int = 200, phrase: str = "", idx: int = 0) -> None:
        self.response_status = (code, phrase)

    def get_response_status(self, idx: int = 0) -> tuple[int, str]:
        return self.response_status or (200, "")


# --- the handler contract -------------------------------------------------------------------------

# Each function's required arguments; a function may take one more, the context.
PARAMETERS: dict[str, tuple[str, ...]] = {
    "pre_model_fn": ("model_dir",),
    "model_fn": ("model_dir",),
    "model_warmup_fn": ("model_dir", "model"),
    "input_fn": ("input_data", "content_type"),
    "predict_fn": ("data", "model"),
    "output_fn": ("prediction", "accept"),
    "transform_fn": ("model", "input_data", "content_type", "accept"),
}


def takes_context(name: str, func: Callable[..., Any]) -> bool:
    """Whether `func` wants the trailing context argument, decided once from its signature."""
    params = PARAMETERS[name]
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return False  # builtins without a signature: call them without context
    for with_context in (True, False):
        try:
            signature.bind(*params, *(("context",) if with_context else ()))
            return with_context
        except TypeError:
            continue
    wanted = ", ".join(params)
    raise HandlerError(500, f"{name} must take ({wanted}) or ({wanted}, context), but it is "
                             f"{name}{signature}; change its parameters.")


@dataclass(frozen=True)
class Function:
    """One handler function, called with or without context as its signature asks."""

    name: str
    func: Callable[..., Any]
    with_context: bool
    default: bool = False

    @classmethod
    def of(cls, name: str, func: Callable[..., Any], *, default: bool = False) -> Function:
        return cls(name, func, takes_context(name, func), default)

    def __call__(self, context: Context, *args: Any) -> Any:
        try:
            return self.func(*args, context) if self.with_context else self.func(*args)
        except (HandlerError):
            raise
        except Exception as e:
            raise _failure(self, e) from e


def _failure(function: Function, error: Exception) -> HandlerError:
    log.error("%s raised:\n%s", function.name, traceback.format_exc())
    # The toolkit's BaseInferenceToolkitError (and look-alikes) carry the status to answer.
    status = getattr(error, "status_code", 500)
    status = status if isinstance(status, int) and 400 <= status <= 599 else 500
    detail = getattr(error, "message", None) if hasattr(error, "status_code") else None
    which = f"the default {function.name}" if function.default else function.name
    message = f"{which} raised {type(error).__name__}: {detail or error}"
    if function.default and function.name in _DEFAULT_HINTS:
        message += _DEFAULT_HINTS[function.name]
    if isinstance(error, ModuleNotFoundError):
        message += f"; add {error.name} to code/requirements.txt"
    return HandlerError(status, message + " (traceback in the model's log)")


_DEFAULT_HINTS = {
    "predict_fn": " (it calls model(data)); define predict_fn(data, model) or return a callable model",
}


def default_model_fn(model_dir: str) -> Any:
    raise NotImplementedError("inference.py has no model_fn; add model_fn(model_dir) that loads the model")


def default_input_fn(input_data: bytes | str, content_type: str) -> Any:
    return codecs.decode(input_data, content_type)


def default_predict_fn(data: Any, model: Any) -> Any:
    return model(data)


def default_output_fn(prediction: Any, accept: str) -> tuple[bytes, str]:
    return codecs.encode(prediction, accept)


@dataclass
class Handler:
    """A loaded handler: the model model_fn returned and the functions that turn a request into a reply."""

    model_dir: str
    model: Any = None
    functions: dict[str, Function] = field(default_factory=dict)

    def transform(self, body: bytes | str, content_type: str, accept: str, context: Context) -> Any:
        fn = self.functions
        if "transform_fn" in fn:
            return fn["transform_fn"](context, self.model, body, content_type, accept)
        data = fn["input_fn"](context, body, content_type)
        prediction = fn["predict_fn"](context, data, self.model)
        return fn["output_fn"](context, prediction, accept)


_DEFAULTS: dict[str, Callable[..., Any]] = {
    "model_fn": default_model_fn, "input_fn": default_input_fn,
    "predict_fn": default_predict_fn, "output_fn": default_output_fn,
}


def resolve(module: Any) -> dict[str, Function]:
    """The module's handler functions, with the toolkit's defaults for the ones it leaves out."""
    found = {name: getattr(module, name) for name in PARAMETERS if callable(getattr(module, name, None))}
    pipeline = {"input_fn", "predict_fn", "output_fn"} & found.keys()
    if "transform_fn" in found and pipeline:
        raise HandlerError(500, f"inference.py defines transform_fn and {', '.join(sorted(pipeline))}; "
                                 "define either transform_fn alone or input_fn/predict_fn/output_fn.")
    functions = {name: Function.of(name, func) for name, func in found.items()}
    needed = ("model_fn",) if "transform_fn" in found else tuple(_DEFAULTS)
    for name in needed:
        if name not in functions:
            functions[name] = Function.of(name, _DEFAULTS[name], default=True)
    return functions


def import_handler(path: Path, import_path: Sequence[Path] = ()) -> Any:
    """Import inference.py as the toolkit does: by module name, with its folder first on sys.path (then the
    other folders the container makes importable: code/, the model folder)."""
    folders = [str(path.parent), *(str(p) for p in import_path if p != path.parent)]
    sys.path[0:0] = list(dict.fromkeys(folders))
    try:
        return importlib.import_module(path.stem)
    except Exception as e:
        log.error("importing %s raised:\n%s", path, traceback.format_exc())
        hint = f"; add {e.name} to code/requirements.txt" if isinstance(e, ModuleNotFoundError) else ""
        raise HandlerError(500, f"importing {path} raised {type(e).__name__}: {e}{hint}") from e


def load(path: Path, model_dir: str, import_path: Sequence[Path] = ()) -> Handler:
    handler = Handler(model_dir, functions=resolve(import_handler(path, import_path)))
    context = Context(model_dir)
    fn = handler.functions
    if "pre_model_fn" in fn:
        fn["pre_model_fn"](context, model_dir)
    handler.model = fn["model_fn"](context, model_dir)
    if "model_warmup_fn" in fn:
        fn["model_warmup_fn"](context, model_dir, handler.model)
    return handler


def default_accept() -> str:
    return Env().get("SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT", cast=str, default=codecs.JSON)


def handle(handler: Handler, request: WorkerRequest) -> WorkerReply:
    context = Context(handler.model_dir, request.headers(), request.request_id)
    accept = request.accept if codecs.media_type(request.accept) not in ("", codecs.ANY) else default_accept()
    try:
        body = _request_body(request)
        result = handler.transform(body, request.content_type, accept, context)
        return _reply(result, accept, context)
    except (HandlerError) as e:
        return WorkerReply(status=e.status, error=e.message)


def _request_body(request: WorkerRequest) -> bytes | str:
    """JSON and CSV reach input_fn as str, everything else as bytes, as in the toolkit."""
    if codecs.media_type(request.content_type) not in codecs.TEXT_TYPES:
        return request.body
    try:
        return request.body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise HandlerError(400, f"The {request.content_type} body is not UTF-8 ({e}); send UTF-8.",
                                ) from e


def _reply(result: Any, accept: str, context: Context) -> WorkerReply:
    body, content_type = result if isinstance(result, tuple) and len(result) == 2 else (result, accept)
    code, phrase = context.get_response_status()
    if code >= 400:
        return WorkerReply(status=code, error=phrase or _as_bytes(body)[0].decode("utf-8", "replace"))
    data, encoded_type = _as_bytes(body)
    return WorkerReply(body=data, content_type=encoded_type or str(content_type or accept))


def _as_bytes(body: Any) -> tuple[bytes, str | None]:
    """The response bytes; anything but str or bytes is written as JSON (and labelled so)."""
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body), None
    if isinstance(body, str):
        return body.encode("utf-8"), None
    if body is None:
        return b"", None
    try:
        return codecs.encode(body, codecs.JSON)
    except HandlerError as e:
        raise HandlerError(500, f"the handler returned a {type(body).__name__}, which is neither str nor "
                                 f"bytes nor JSON-serializable; return str or bytes from output_fn "
                                 f"({e.message})") from e
