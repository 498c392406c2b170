"""The two services' protocols, as botocore speaks them: Application Auto Scaling is AWS JSON 1.1
(`X-Amz-Target: AnyScaleFrontendService.<Op>`); CloudWatch is AWS JSON 1.0 in query-compatible mode
(`X-Amz-Target: GraniteServiceVersion20100801.<Op>`, what boto3 sends today) or Smithy RPC v2 CBOR
(`POST /service/GraniteServiceVersion20100801/operation/<Op>`, what botocore sends when it prefers that protocol).

Requests are checked against botocore's own service model (its ParamValidator: required members, types, unknown
members) before any operation sees them. Timestamps arrive as epoch numbers (JSON) or CBOR dates, and leave the
same way: epoch numbers in JSON, CBOR dates (tag 1) where the output shape has a timestamp.
"""

from __future__ import annotations

import datetime as dt
import json
import json.scanner
from dataclasses import dataclass
from functools import cache
from typing import Any

import botocore.session
import cbor2
from botocore.validate import ParamValidator

from pier.autoscaling.errors import ScalingError, ScalingValidation, UnknownOperation
from pier.dialect import AUTOSCALING_TARGET, CLOUDWATCH_TARGET, Dialect
from pier.error_bodies import render

SERVICES = {AUTOSCALING_TARGET: "application-autoscaling", CLOUDWATCH_TARGET: "cloudwatch"}

Body = dict[str, Any]
# Above this, a JSON body is parsed by the json module's pure-Python scanner, which lets the event loop's thread run
# every few milliseconds; json.loads holds the GIL for the whole parse: the largest PutMetricData (2.7 MB, 1,000
# metrics of 150 values) took 30-70 ms in one C call and held /ping past its 50 ms (tests/e2e/test_event_loop_e2e.py).
# The scanner is about 5x slower, on the writer's thread; bodies under this size keep the C parser.
LARGE_JSON_BYTES = 256 * 1024


def loads_json(raw: bytes) -> Any:
    """A request body's JSON, parsed in small steps when it is large (LARGE_JSON_BYTES)."""
    if len(raw) <= LARGE_JSON_BYTES:
        return json.loads(raw)
    decoder = json.JSONDecoder()
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    return decoder.decode(raw.decode("utf-8"))


@dataclass(frozen=True)
class Protocol:
    name: str  # "json" or "cbor"
    media_type: str

    def decode(self, raw: bytes) -> Body:
        if not raw.strip():
            return {}
        try:
            body = cbor2.loads(raw) if self.name == "cbor" else loads_json(raw)
        except (ValueError, cbor2.CBORDecodeError, RecursionError) as error:
            raise ScalingValidation(f"The request body is not {self.name.upper()} ({error}).") from None
        if not isinstance(body, dict):
            raise ScalingValidation(f"The request body must be a {self.name.upper()} object.")
        return body

    def encode(self, body: Body, shape: Any = None) -> bytes:
        """`body` in this protocol; in CBOR, the members `shape` (botocore's output shape) says are timestamps
        become CBOR dates (tag 1), which botocore's CBOR parser requires (its JSON parser reads epoch numbers)."""
        if self.name == "cbor":
            return cbor2.dumps(_dates(body, shape) if shape is not None else body, datetime_as_timestamp=True)
        return json.dumps(body).encode()

    def error(self, error: ScalingError) -> tuple[bytes, dict[str, str]]:
        body = render(error, Dialect.CONTROL).body
        headers = {"x-amzn-query-error": f"{error.query_code};Sender"} if error.query_code else {}
        return self.encode(body), headers


JSON_1_1 = Protocol("json", "application/x-amz-json-1.1")
JSON_1_0 = Protocol("json", "application/x-amz-json-1.0")
CBOR = Protocol("cbor", "application/cbor")


@cache
def service_model(service: str) -> Any:
    return botocore.session.get_session().get_service_model(service)


def check(service: str, operation: str, body: Body) -> Body:
    """`body` as botocore's model of `operation` allows it; timestamps become epoch seconds."""
    model = service_model(service)
    if operation not in model.operation_names:
        raise UnknownOperation(f"{service} has no operation {operation!r}.")
    report = ParamValidator().validate(body, model.operation_model(operation).input_shape)
    if report.has_errors():
        raise ScalingValidation(f"{operation}: {report.generate_report()}")
    return _epochs(body)


def output_shape(service: str, operation: str) -> Any:
    return service_model(service).operation_model(operation).output_shape


def _dates(value: Any, shape: Any) -> Any:
    kind = shape.type_name
    if kind == "timestamp" and isinstance(value, int | float):
        return dt.datetime.fromtimestamp(value, dt.UTC)
    if kind == "structure" and isinstance(value, dict):
        return {k: _dates(v, shape.members[k]) if k in shape.members else v for k, v in value.items()}
    if kind == "list" and isinstance(value, list):
        return [_dates(v, shape.member) for v in value]
    if kind == "map" and isinstance(value, dict):
        return {k: _dates(v, shape.value) for k, v in value.items()}
    return value


def _epochs(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return (value if value.tzinfo else value.replace(tzinfo=dt.UTC)).timestamp()
    if isinstance(value, dict):
        return {k: _epochs(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_epochs(v) for v in value]
    return value


def epoch(value: Any) -> float:
    """A timestamp member as epoch seconds (a number, or an ISO 8601 string as some clients send)."""
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    raise ScalingValidation(f"{value!r} is not a timestamp: send epoch seconds or ISO 8601.")
