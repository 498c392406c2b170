"""allOf as one schema: two schemas merged into one that asks for both, as far as their keywords combine
(engine/json_schema.py turns the result into a grammar)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _merge(a: Any, b: Any) -> Any:
    """Two schemas as one that asks for both (allOf), as far as their keywords combine; what does not combine
    stays the first's, and the whole is checked after generation anyway."""
    if a is True or b is True:
        return b if a is True else a
    if a is False or b is False:
        return False
    out = dict(a)
    for key, value in b.items():
        if key not in out:
            out[key] = value
        elif key == "properties":
            out[key] = {**out[key], **{k: (_merge(out[key][k], v) if k in out[key] else v) for k, v in value.items()}}
        elif key == "required":
            out[key] = list(dict.fromkeys([*out[key], *value]))
        elif key in ("minimum", "exclusiveMinimum", "minLength", "minItems") and _numeric(value, out[key]):
            out[key] = max(out[key], value)
        elif key in ("maximum", "exclusiveMaximum", "maxLength", "maxItems") and _numeric(value, out[key]):
            out[key] = min(out[key], value)
        elif key == "type":
            mine = out[key] if isinstance(out[key], list) else [out[key]]
            theirs = value if isinstance(value, list) else [value]
            both = [t for t in mine if t in theirs or (t == "integer" and "number" in theirs)]
            both += [t for t in theirs if t == "integer" and "number" in mine and t not in both]
            out[key] = both[0] if len(both) == 1 else both
        elif key == "enum":
            out[key] = [v for v in out[key] if v in value]
        elif key in ("anyOf", "oneOf", "allOf"):
            out["allOf"] = [*out.get("allOf", []), {key: value}] if key != "allOf" else [*out["allOf"], *value]
        elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
            out[key] = _merge(out[key], value) if isinstance(out[key], Mapping) else out[key]
    return out


def _numeric(*values: Any) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
