"""A request read into its shape (control/shapes.py), or refused with a ValidationException worded as AWS words it
("1 validation error detected: Value 'x' at 'endpointName' failed to satisfy constraint: ...")."""

from __future__ import annotations

from typing import Any, TypeVar

import pydantic
from pydantic import BaseModel

from pier.control.errors import ValidationError
from pier.control.names import NAME_HINT

S = TypeVar("S", bound=BaseModel)


def parse(shape: type[S], body: dict[str, Any]) -> S:
    """The request as `shape`, or a ValidationException worded as AWS words it."""
    try:
        return shape.model_validate(body)
    except pydantic.ValidationError as error:
        raise ValidationError(describe_errors(error)) from None


def describe_errors(error: pydantic.ValidationError) -> str:
    problems = error.errors(include_url=False)
    lines = [_problem(p) for p in problems]
    head = f"{len(lines)} validation error{'s' if len(lines) > 1 else ''} detected: "
    names = any(p["type"] == "string_pattern_mismatch" for p in problems)
    return head + "; ".join(lines) + (f". {NAME_HINT}" if names else "")


def _problem(problem: Any) -> str:
    kind = problem["type"]
    if kind == "value_error":  # our own cross-field checks: already a sentence that says how to fix it
        return str(problem["msg"]).removeprefix("Value error, ").rstrip(".")
    where = _member_path(problem["loc"])
    value = "null" if kind == "missing" else f"'{_shown(problem.get('input'))}'"
    constraint = _constraint(kind, problem.get("ctx") or {}, str(problem["msg"]))
    return f"Value {value} at '{where}' failed to satisfy constraint: {constraint}"


def _shown(value: Any) -> str:
    """A refused value as the message shows it: whole when short, its start when long (a message never echoes a
    megabyte back)."""
    text = str(value)
    return text if len(text) <= 100 else text[:97] + "..."


def _constraint(kind: str, ctx: dict[str, Any], message: str) -> str:
    match kind:
        case "missing":
            return "Member must not be null"
        case "string_pattern_mismatch":
            return f"Member must satisfy regular expression pattern: {ctx.get('pattern')}"
        case "string_too_long":
            return f"Member must have length less than or equal to {ctx.get('max_length')}"
        case "string_too_short":
            return f"Member must have length greater than or equal to {ctx.get('min_length')}"
        case "greater_than_equal" | "greater_than":
            return f"Member must have value greater than or equal to {ctx.get('ge', ctx.get('gt'))}"
        case "less_than_equal" | "less_than":
            return f"Member must have value less than or equal to {ctx.get('le', ctx.get('lt'))}"
        case "too_short":
            return f"Member must have length greater than or equal to {ctx.get('min_length')}"
        case "too_long":
            return f"Member must have length less than or equal to {ctx.get('max_length')}"
        case "literal_error":
            return f"Member must satisfy enum value set: [{ctx.get('expected')}]"
        case _:
            return message


def _member_path(loc: tuple[Any, ...]) -> str:
    """('ProductionVariants', 0, 'VariantName') -> 'productionVariants.1.member.variantName', as AWS writes it."""
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            parts.append(f"{part + 1}.member")
        else:
            parts.append(part[:1].lower() + part[1:])
    return ".".join(parts)
