"""The default request decoders and response encoders of SageMaker's inference toolkit: JSON, CSV, NPY.

A handler that leaves out `input_fn` or `output_fn` gets these, so a request body turns into numpy
(or plain Python for JSON that is not an array) and a prediction turns back into bytes of the type
the client accepts.
"""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np

from pier.server.byoc.errors import HandlerError

JSON = "application/json"
CSV = "text/csv"
NPY = "application/x-npy"
ANY = "*/*"
SUPPORTED = (JSON, CSV, NPY)
# The toolkit hands these to input_fn as str rather than bytes.
TEXT_TYPES = (JSON, CSV)


def media_type(header: str | None) -> str:
    """`application/json; charset=utf-8` -> `application/json`: parameters never change the codec."""
    return (header or "").split(";", 1)[0].strip().lower()


def decode(body: bytes | str, content_type: str) -> Any:
    """Turn a request body into numpy (or plain Python for JSON objects and strings)."""
    kind = media_type(content_type)
    if kind not in SUPPORTED:
        shown = content_type or "(none)"
        raise HandlerError(
            415,
            f"Content type {shown} is not supported by the default input_fn; send one of "
            f"{', '.join(SUPPORTED)}, or define input_fn(input_data, content_type) in inference.py for it.",
        )
    try:
        return _DECODERS[kind](body)
    except (ValueError, UnicodeDecodeError) as e:
        raise HandlerError(400, f"The request body is not valid {kind}: {e}. Fix the body or its type.") from e
    except RecursionError:
        raise HandlerError(400, f"The {kind} body nests arrays or objects too deeply to be read (about 1,000 levels "
                                f"at most); send a flatter body.") from None


def encode(prediction: Any, accept: str) -> tuple[bytes, str]:
    """Write a prediction as the first type in `accept` that the defaults support; `*/*` means JSON."""
    kind = choose_accept(accept)
    try:
        return _ENCODERS[kind](prediction), kind
    except (TypeError, ValueError) as e:
        raise HandlerError(
            406,
            f"The prediction ({type(prediction).__name__}) cannot be written as {kind}: {e}. Ask for another "
            f"Accept type or define output_fn(prediction, accept) in your inference.py.",
        ) from e


def choose_accept(accept: str) -> str:
    """The first supported media type in an Accept header (`a/b;q=0.5, c/d`); 406 when there is none."""
    offered = [media_type(part) for part in (accept or ANY).split(",")]
    for kind in offered:
        if kind in ("", ANY):
            return JSON
        if kind in SUPPORTED:
            return kind
    raise HandlerError(
        406,
        f"Accept {accept} is not supported by the default output_fn; ask for one of {', '.join(SUPPORTED)} "
        f"(or */*), or define output_fn(prediction, accept) in your inference.py to write it.",
    )


def _text(body: bytes | str) -> str:
    return body.decode("utf-8") if isinstance(body, bytes | bytearray) else body


def _decode_json(body: bytes | str) -> Any:
    data = json.loads(_text(body))
    if not isinstance(data, list | int | float):
        return data  # np.array of a dict or str is a 0-d object array nobody can use
    try:
        return np.array(data)
    except ValueError:
        return data  # ragged nested lists: numpy refuses them, the handler still can read them


def _decode_csv(body: bytes | str) -> np.ndarray:
    return np.genfromtxt(io.StringIO(_text(body)), dtype=None, delimiter=",", encoding="utf-8")


def _decode_npy(body: bytes | str) -> np.ndarray:
    raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    # Unlike the toolkit, no pickles: loading one runs whatever code the request carries.
    return np.load(io.BytesIO(raw), allow_pickle=False)


def _encode_json(prediction: Any) -> bytes:
    return json.dumps(prediction, default=_jsonable).encode("utf-8")


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy arrays and numpy scalars
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _encode_csv(prediction: Any) -> bytes:
    stream = io.StringIO()
    np.savetxt(stream, np.atleast_1d(np.asarray(prediction)), delimiter=",", fmt="%s")
    return stream.getvalue().encode("utf-8")


def _encode_npy(prediction: Any) -> bytes:
    stream = io.BytesIO()
    np.save(stream, np.asarray(prediction), allow_pickle=False)
    return stream.getvalue()


_DECODERS = {JSON: _decode_json, CSV: _decode_csv, NPY: _decode_npy}
_ENCODERS = {JSON: _encode_json, CSV: _encode_csv, NPY: _encode_npy}
