"""The check after generation: a finished structured answer validated against its whole schema with `jsonschema`
(formats included), for the keywords a grammar cannot follow (engine/json_schema.py's `unenforced`: uniqueItems,
multipleOf, not, ...). The answer is kept either way; the caller says what the check found."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema

log = logging.getLogger(__name__)
MAX_REPORTED = 5


@dataclass(frozen=True)
class SchemaCheck:
    """A schema to check answers against, and the keywords its grammar did not enforce."""

    schema: Mapping[str, Any] | bool
    unenforced: frozenset[str]

    def violations(self, text: str) -> list[str]:
        """What in `text` breaks the schema, as messages naming where ("/items/2: ..."); [] when it is valid."""
        try:
            document = json.loads(text)
        except json.JSONDecodeError as e:
            return [f"the answer is not complete JSON ({e.msg} at character {e.pos}); raise max_tokens"]
        schema = _nullable_as_types(self.schema)
        validator_class = jsonschema.validators.validator_for(schema)
        validator = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
        return [f"/{'/'.join(str(p) for p in e.absolute_path)}: {e.message[:200]}" for e in errors[:MAX_REPORTED]]

    def report(self, text: str) -> dict[str, Any] | None:
        """What an answer says about the check: whether the output is valid, the keywords checked only after
        generation, and what broke the schema. None when the grammar enforced everything and the output is valid
        (nothing to say)."""
        violations = self.violations(text)
        if not violations and not self.unenforced:
            return None
        if violations:
            log.info("structured output broke its schema: %s", "; ".join(violations))
        return {"valid": not violations, "checked_after_generation": sorted(self.unenforced),
                "violations": violations}


def _nullable_as_types(schema: Any) -> Any:
    """OpenAPI's `nullable: true` (which JSON Schema does not know, and the grammar follows) as a type list."""
    if isinstance(schema, list):
        return [_nullable_as_types(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {k: _nullable_as_types(v) for k, v in schema.items() if not (k == "nullable" and isinstance(v, bool))}
    if schema.get("nullable") is True:
        return {"anyOf": [out, {"type": "null"}]}
    return out
