"""SageMaker's own limits on what a control-plane request may hold, read from botocore's service model, so
pier refuses what SageMaker refuses, in its words, before any of it is stored or acted on.

Two layers, both before the operation's own shape (`shapes.py`) sees the request:

- `parse_body()`: the raw body. At most `MAX_BODY_BYTES`, JSON, an object, nested at most `MAX_DEPTH`
  deep, finite numbers, text that UTF-8 can hold (a lone surrogate could be neither stored nor answered).
- `check_request()`: the operation's input shape in botocore's model. Every member botocore models is
  checked for its JSON type (`SerializationException`, as AWS answers a number where a string belongs),
  and for its length, size, range and enum (`ValidationException`, worded as AWS words it: "1 validation
  error detected: Value '...' at 'modelName' failed to satisfy constraint: Member must have length less
  than or equal to 63"). Patterns are checked for names and Environment keys: pier deliberately takes
  more than AWS elsewhere (local paths and hf:// URLs in ModelDataUrl, the `local` instance type).
  On top, what the model's documentation says but its constraints do not: an Environment block's keys and
  values total at most 32 KB, and (pier's own) a value holds no NUL, which no process environment can.

Members botocore does not model are left alone (pier keeps them so Describe echoes them).
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from pier.control.errors import SerializationError, ValidationError
from pier.control.names import NAME_HINT

MAX_BODY_BYTES = 1 << 20  # far above any valid request (32 KB of Environment is the largest part of one)
MAX_DEPTH = 32  # the deepest request shape pier serves nests 7 levels; the rest is room for unmodelled members
ENVIRONMENT_TOTAL_BYTES = 32 * 1024  # "The maximum length of all keys and values in the map, combined, is 32 KB."
MAX_REPORTED = 10  # problems named in one message; the rest are counted

# Shapes whose `pattern` pier enforces (by botocore's shape name). Elsewhere pier takes more than AWS does.
PATTERNED = frozenset({
    "ModelName", "EndpointName", "EndpointConfigName", "VariantName", "InferenceComponentName", "EnvironmentKey",
    "ModelNameContains", "EndpointNameContains", "EndpointConfigNameContains", "InferenceComponentNameContains",
})
NAME_SHAPES = frozenset({"ModelName", "EndpointName", "EndpointConfigName", "VariantName", "InferenceComponentName"})
# Enums pier widens: its own instance types (`local`, and families it knows that botocore's enum lacks).
OPEN_ENUMS = frozenset({"ProductionVariantInstanceType", "TransformInstanceType"})
# Shapes whose minimum length pier does not demand: pier has no IAM and ignores the role, so a placeholder
# role (as local-mode SageMaker code often passes) is taken. Their maximum still holds.
NO_MINIMUM = frozenset({"RoleArn"})
ENVIRONMENT_SHAPE = "EnvironmentMap"

_INT_RANGE = {"integer": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
_JSON_NAMES = {dict: "START_OBJECT", list: "START_ARRAY", str: "STRING_VALUE", bool: "BOOLEAN_VALUE",
               int: "NUMBER_VALUE", float: "NUMBER_VALUE", type(None): "NULL_VALUE"}
_WANTED = {"structure": "a Structure", "map": "a Map", "list": "a List", "string": "a String",
           "integer": "an Integer", "long": "a Long", "float": "a Float", "double": "a Double",
           "boolean": "a Boolean", "timestamp": "a Timestamp", "blob": "a Blob"}


# ---- the raw body


def parse_body(raw: bytes) -> dict[str, Any]:
    """The request body as a JSON object, or a SerializationException that says what is wrong with it."""
    if len(raw) > MAX_BODY_BYTES:
        raise body_too_large(len(raw))
    try:
        body = json.loads(raw or b"{}", parse_constant=_no_constant)
    except RecursionError:
        raise SerializationError(f"The request body nests JSON too deeply (more than {MAX_DEPTH} levels); send "
                                 "the operation's request shape.") from None
    except (ValueError, UnicodeDecodeError) as error:  # JSONDecodeError is a ValueError; so are 5,000-digit ints
        raise SerializationError(f"The request body is not JSON ({_short(str(error), 200)}); send a JSON "
                                 "object.") from None
    if not isinstance(body, dict):
        raise SerializationError("The request body must be a JSON object.")
    _check_tree(body)
    return body


def body_too_large(size: int) -> ValidationError:
    return ValidationError(f"The request body is {size} bytes; the control plane takes at most {MAX_BODY_BYTES} "
                           "bytes per request.")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _check_tree(body: dict[str, Any]) -> None:
    """Depth and text, iteratively (a recursive walk is what the depth limit protects against)."""
    stack: list[tuple[Any, int]] = [(body, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                raise SerializationError(f"The request body nests JSON too deeply (more than {MAX_DEPTH} levels); "
                                         "send the operation's request shape.")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str):
                    _check_text(key)
                stack.append((item, depth + 1))
        elif isinstance(value, str):
            _check_text(value)
        elif isinstance(value, float) and not math.isfinite(value):
            raise SerializationError("The request body holds a number too large for a double (1e999 is read as "
                                     "infinity); send a finite number.")


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise SerializationError("The request body holds a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff "
                                 "escape), which is not text; send valid Unicode.") from None


# ---- the operation's input shape


@dataclass
class _Problems:
    validation: list[str] = field(default_factory=list)
    names: bool = False  # a name failed its pattern: the message says what names may hold
    environment_bytes: int = 0


def check_request(operation: str, body: dict[str, Any]) -> None:
    """Refuse `body` when it breaks a constraint botocore models for `operation`'s input (unknown operations
    and unmodelled members pass: the operation's own shape decides about those)."""
    shape = _input_shape(operation)
    if shape is None:
        return
    problems = _Problems()
    _check(shape, body, "", problems)
    if problems.environment_bytes > ENVIRONMENT_TOTAL_BYTES:
        problems.validation.append(
            f"The keys and values of the request's Environment maps total {problems.environment_bytes} bytes; "
            f"SageMaker allows at most {ENVIRONMENT_TOTAL_BYTES} (32 KB) for all of them together")
    if problems.validation:
        raise ValidationError(describe(problems.validation, names=problems.names))


def describe(lines: list[str], *, names: bool = False) -> str:
    shown = lines[:MAX_REPORTED]
    more = f"; and {len(lines) - len(shown)} more" if len(lines) > len(shown) else ""
    head = f"{len(lines)} validation error{'s' if len(lines) > 1 else ''} detected: "
    return head + "; ".join(shown) + more + (f". {NAME_HINT}" if names else "")


def load_model() -> None:
    """Read botocore's model now (a fifth of a second), so the first request does not wait on it."""
    _service()


@cache
def _service() -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model("sagemaker")


def _input_shape(operation: str) -> Any:
    model = _service()
    if operation not in model.operation_names:
        return None
    return model.operation_model(operation).input_shape


def _check(shape: Any, value: Any, path: str, problems: _Problems) -> None:
    kind = shape.type_name
    if value is None:
        return  # JSON null is an absent member, as AWS reads it; required members are the shape's to demand
    if not _json_type_fits(kind, value):
        raise SerializationError(
            f"{_JSON_NAMES.get(type(value), 'VALUE')} can not be converted to {_WANTED.get(kind, kind)} "
            f"(at '{path or 'body'}'): send the type the operation's model gives that member.")
    if kind == "structure":
        for name, member in shape.members.items():
            if name in value:
                _check(member, value[name], _join(path, name), problems)
    elif kind == "list":
        problems.validation += _constraints(shape, value, path, problems)
        for i, item in enumerate(value):
            _check(shape.member, item, f"{path}.{i + 1}.member", problems)
    elif kind == "map":
        problems.validation += _constraints(shape, value, path, problems)
        if shape.name == ENVIRONMENT_SHAPE:
            problems.environment_bytes += sum(len(k.encode()) + len(v.encode()) for k, v in value.items()
                                              if isinstance(k, str) and isinstance(v, str))
        _check_map(shape, value, path, problems)
    else:
        problems.validation += _constraints(shape, value, path, problems)


def _check_map(shape: Any, value: dict[str, Any], path: str, problems: _Problems) -> None:
    key_rules: set[str] = set()
    value_rules: set[str] = set()
    for key, item in value.items():
        key_rules.update(_rules(shape.key, key, problems))
        if not _json_type_fits(shape.value.type_name, item):
            _check(shape.value, item, f"{path}.{key}", problems)  # raises the serialization error
        if shape.value.type_name == "string" and isinstance(item, str):
            value_rules.update(_rules(shape.value, item, problems))
            if shape.name == ENVIRONMENT_SHAPE and "\x00" in item:
                value_rules.add("Member must not contain a NUL character (no process environment can hold one)")
        elif shape.value.type_name in ("structure", "list", "map"):
            _check(shape.value, item, f"{path}.{key}", problems)
    where = f"at '{path}' failed to satisfy constraint"
    if key_rules:
        problems.validation.append(f"Value '{_render(value)}' {where}: Map keys must satisfy constraint: "
                                   f"[{', '.join(sorted(key_rules))}]")
    if value_rules:
        problems.validation.append(f"Value '{_render(value)}' {where}: Map value must satisfy constraint: "
                                   f"[{', '.join(sorted(value_rules))}]")


def _constraints(shape: Any, value: Any, path: str, problems: _Problems) -> list[str]:
    return [f"Value '{_render(value)}' at '{path}' failed to satisfy constraint: {rule}"
            for rule in _rules(shape, value, problems)]


def _rules(shape: Any, value: Any, problems: _Problems) -> Iterator[str]:
    """The constraints of `shape` that `value` (of the right JSON type) breaks, in AWS's words."""
    meta = shape.metadata
    kind = shape.type_name
    if kind in ("string", "list", "map", "blob"):
        length = len(value)
        if "max" in meta and length > meta["max"]:
            yield f"Member must have length less than or equal to {_number(meta['max'])}"
        if "min" in meta and length < meta["min"] and shape.name not in NO_MINIMUM:
            yield f"Member must have length greater than or equal to {_number(meta['min'])}"
    if kind == "string":
        if shape.enum and value not in shape.enum and shape.name not in OPEN_ENUMS:
            yield f"Member must satisfy enum value set: [{', '.join(shape.enum)}]"
        pattern = meta.get("pattern")
        if pattern and shape.name in PATTERNED and not _compiled(pattern).fullmatch(value):
            if shape.name in NAME_SHAPES:
                problems.names = True
            yield f"Member must satisfy regular expression pattern: ^{pattern}$"
    if kind in ("integer", "long", "float", "double"):
        if kind in _INT_RANGE:
            low, high = _INT_RANGE[kind]
            if not low <= value <= high:
                raise SerializationError(f"Numeric value ({_short(str(value), 40)}) out of range of "
                                         f"{_WANTED[kind].split()[1]}.")
        if "min" in meta and value < meta["min"]:
            yield f"Member must have value greater than or equal to {_number(meta['min'])}"
        if "max" in meta and value > meta["max"]:
            yield f"Member must have value less than or equal to {_number(meta['max'])}"


def _json_type_fits(kind: str, value: Any) -> bool:
    match kind:
        case "structure" | "map":
            return isinstance(value, dict)
        case "list":
            return isinstance(value, list)
        case "string" | "blob":
            return isinstance(value, str)
        case "boolean":
            return isinstance(value, bool)
        case "integer" | "long":
            return isinstance(value, int) and not isinstance(value, bool)
        case "float" | "double":
            return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        case "timestamp":
            return (isinstance(value, int | float) and not isinstance(value, bool)) or isinstance(value, str)
        case _:
            return True


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _join(path: str, member: str) -> str:
    """A member's place as AWS writes it: 'productionVariants.1.member.variantName'."""
    part = member[:1].lower() + member[1:]
    return f"{path}.{part}" if path else part


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _render(value: Any) -> str:
    """A value as AWS shows it in a message (Java's toString: {k=v}, [a, b]), cut short when long."""
    if isinstance(value, dict):
        text = "{" + ", ".join(f"{k}={_render(v)}" for k, v in itertools.islice(value.items(), 20)) + "}"
    elif isinstance(value, list):
        text = "[" + ", ".join(_render(v) for v in value[:20]) + "]"
    else:
        text = str(value)
    return _short(text, 100)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
