"""TGI 2.0.0's schemas for /generate and /generate_stream answers and for the request's `grammar` (components of
docs/openapi.json of huggingface/text-generation-inference at v2.0.0), with `additionalProperties: false` added
where TGI serializes exactly these fields. pier's stream details also carry `input_length` (TGI 2.1's), allowed.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

_NULLABLE_NUMBER = {"type": ["number", "null"]}
SCHEMAS: dict[str, Any] = {
    "GenerateResponse": {
        "type": "object", "additionalProperties": False, "required": ["generated_text"],
        "properties": {"generated_text": {"type": "string"},
                       "details": {"oneOf": [{"$ref": "#/$defs/Details"}, {"type": "null"}]}},
    },
    "Details": {
        "type": "object", "additionalProperties": False,
        "required": ["finish_reason", "generated_tokens", "prefill", "tokens"],
        "properties": {
            "best_of_sequences": {"type": ["array", "null"], "items": {"$ref": "#/$defs/BestOfSequence"}},
            "finish_reason": {"$ref": "#/$defs/FinishReason"},
            "generated_tokens": {"type": "integer", "minimum": 0},
            "prefill": {"type": "array", "items": {"$ref": "#/$defs/PrefillToken"}},
            "seed": {"type": ["integer", "null"], "minimum": 0},
            "tokens": {"type": "array", "items": {"$ref": "#/$defs/Token"}},
            "top_tokens": {"type": "array", "items": {"type": "array", "items": {"$ref": "#/$defs/Token"}}},
        },
    },
    "BestOfSequence": {
        "type": "object", "additionalProperties": False,
        "required": ["generated_text", "finish_reason", "generated_tokens", "prefill", "tokens"],
        "properties": {
            "generated_text": {"type": "string"}, "finish_reason": {"$ref": "#/$defs/FinishReason"},
            "generated_tokens": {"type": "integer", "minimum": 0},
            "prefill": {"type": "array", "items": {"$ref": "#/$defs/PrefillToken"}},
            "seed": {"type": ["integer", "null"], "minimum": 0},
            "tokens": {"type": "array", "items": {"$ref": "#/$defs/Token"}},
            "top_tokens": {"type": "array", "items": {"type": "array", "items": {"$ref": "#/$defs/Token"}}},
        },
    },
    "FinishReason": {"type": "string", "enum": ["length", "eos_token", "stop_sequence"]},
    "PrefillToken": {
        "type": "object", "additionalProperties": False, "required": ["id", "text", "logprob"],
        "properties": {"id": {"type": "integer", "minimum": 0}, "logprob": _NULLABLE_NUMBER,
                       "text": {"type": "string"}},
    },
    "Token": {
        "type": "object", "additionalProperties": False, "required": ["id", "text", "logprob", "special"],
        "properties": {"id": {"type": "integer", "minimum": 0}, "logprob": _NULLABLE_NUMBER,
                       "special": {"type": "boolean"}, "text": {"type": "string"}},
    },
    "StreamResponse": {
        "type": "object", "additionalProperties": False, "required": ["index", "token"],
        "properties": {
            "details": {"oneOf": [{"$ref": "#/$defs/StreamDetails"}, {"type": "null"}]},
            "generated_text": {"type": ["string", "null"]}, "index": {"type": "integer", "minimum": 0},
            "token": {"$ref": "#/$defs/Token"},
            "top_tokens": {"type": ["array", "null"], "items": {"$ref": "#/$defs/Token"}},
        },
    },
    "StreamDetails": {
        "type": "object", "required": ["finish_reason", "generated_tokens"],
        "properties": {"finish_reason": {"$ref": "#/$defs/FinishReason"},
                       "generated_tokens": {"type": "integer", "minimum": 0},
                       "seed": {"type": ["integer", "null"], "minimum": 0}},
    },
    "GrammarType": {"oneOf": [
        {"type": "object", "required": ["type", "value"],
         "properties": {"type": {"type": "string", "enum": ["json"]}, "value": {}}},
        {"type": "object", "required": ["type", "value"],
         "properties": {"type": {"type": "string", "enum": ["regex"]}, "value": {"type": "string"}}},
    ]},
}


def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator({**SCHEMAS[name], "$defs": SCHEMAS})
