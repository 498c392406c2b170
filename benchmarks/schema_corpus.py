"""Structured output over a corpus of 32 schemas as users write them (pydantic models' `model_json_schema()`,
OpenAI's structured-output examples, tool definitions): the share pier accepts, the share of answers that
validate, and what the grammar costs per token, on a random-weight model in one copy.

    python benchmarks/schema_corpus.py                     # TINY (2k vocabulary), ~1 min on 2 cores
    python benchmarks/schema_corpus.py --model small       # SMALL (8k vocabulary)

For each schema: is it accepted (a grammar is built and the request answered, not a 400), is the answer valid
JSON under the whole schema (`jsonschema`, formats checked; a keyword left to the check after generation can
fail here), the copy's own timings (time to first token, decode tokens/s) with the grammar, and the same number
of tokens without it (`ignore_eos`). For comparison, the share the converter before this one accepted
(llama-cpp-python's, which refused 23 keywords it would have dropped). Prints a table and a summary.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import httpx
import jsonschema
from common import cached_model, free_port
from pydantic import BaseModel, Field

ROOT = Path(__file__).resolve().parent.parent
OLD_REFUSED = {  # the keywords pier refused before its own converter
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "not", "if", "then", "else",
    "uniqueItems", "contains", "minContains", "maxContains", "patternProperties", "propertyNames",
    "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "dependencies",
    "unevaluatedProperties", "unevaluatedItems", "additionalItems",
}


# -- pydantic models, as an application defines them ------------------------------------------------------

class Address(BaseModel):
    street: str = Field(max_length=40)
    city: str = Field(max_length=20)
    zip: str = Field(pattern=r"^\d{5}(-\d{4})?$")
    country: Literal["US", "CA", "MX"]


class User(BaseModel):
    id: int = Field(gt=0)
    name: str = Field(min_length=1, max_length=30)
    email: str = Field(json_schema_extra={"format": "email"})
    age: int = Field(ge=18, le=120)
    address: Address
    tags: list[str] = Field(default_factory=list, max_length=5)


class Priority(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class Task(BaseModel):
    title: str = Field(max_length=50)
    priority: Priority
    due: datetime.date | None = None
    estimate_hours: float = Field(gt=0, le=100)
    subtasks: list[Task] = Field(default_factory=list, max_length=3)


class LineItem(BaseModel):
    sku: str = Field(pattern=r"^[A-Z]{3}-\d{4}$")
    quantity: int = Field(ge=1, le=999)
    unit_price: float = Field(ge=0)


class Invoice(BaseModel):
    number: str
    issued: datetime.date
    customer_id: Annotated[int, Field(ge=1)]
    items: list[LineItem] = Field(min_length=1, max_length=5)
    currency: Literal["USD", "EUR", "GBP"] = "USD"
    paid: bool


class Event(BaseModel):
    name: str = Field(max_length=40)
    starts_at: datetime.datetime
    duration_minutes: int = Field(multiple_of=15, ge=15, le=480)
    attendees: list[str] = Field(max_length=4, json_schema_extra={"uniqueItems": True})
    location: str | None = None


class Review(BaseModel):
    rating: int = Field(ge=1, le=5)
    sentiment: Literal["positive", "neutral", "negative"]
    summary: str = Field(max_length=80)
    confidence: float = Field(ge=0, le=1)


class Pet(BaseModel):
    kind: Literal["cat"] = "cat"
    lives: int = Field(ge=0, le=9)


class Dog(BaseModel):
    kind: Literal["dog"] = "dog"
    good_boy: bool


class Owner(BaseModel):
    name: str
    pet: Pet | Dog = Field(discriminator="kind")


class Sensor(BaseModel):
    id: str = Field(json_schema_extra={"format": "uuid"})
    reading: float = Field(ge=-40, le=125)
    at: datetime.time
    ok: bool


class Config(BaseModel):
    retries: int = Field(ge=0, le=10)
    timeout_s: float = Field(gt=0, lt=300)
    labels: dict[str, str] = Field(default_factory=dict)
    mode: Literal["fast", "safe"] = "safe"


class Product(BaseModel):
    name: str = Field(max_length=40)
    price: float = Field(gt=0, lt=10_000)
    homepage: str = Field(json_schema_extra={"format": "uri"})
    stock: int = Field(ge=0)
    dimensions_cm: tuple[float, float, float]


class Meeting(BaseModel):
    topic: str
    day: datetime.date
    slots: list[datetime.time] = Field(min_length=1, max_length=3)
    host: User | None = None


PYDANTIC = [User, Task, Invoice, Event, Review, Owner, Sensor, Config, Product, Meeting]

# -- OpenAI structured-output examples (their shapes, written here) ------------------------------------------

MATH = {"type": "object", "additionalProperties": False, "required": ["steps", "final_answer"], "properties": {
    "steps": {"type": "array", "items": {"type": "object", "additionalProperties": False,
                                         "required": ["explanation", "output"],
                                         "properties": {"explanation": {"type": "string"},
                                                        "output": {"type": "string"}}}},
    "final_answer": {"type": "string"}}}
UI = {"type": "object", "$defs": {"ui": {"type": "object", "additionalProperties": False,
                                         "required": ["type", "label", "children", "attributes"], "properties": {
    "type": {"type": "string", "enum": ["div", "button", "header", "section", "field", "form"]},
    "label": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/ui"}},
    "attributes": {"type": "array", "items": {"type": "object", "additionalProperties": False,
                                              "required": ["name", "value"],
                                              "properties": {"name": {"type": "string"},
                                                             "value": {"type": "string"}}}}}}},
      "required": ["ui"], "additionalProperties": False, "properties": {"ui": {"$ref": "#/$defs/ui"}}}
PAPER = {"type": "object", "additionalProperties": False, "required": ["title", "authors", "abstract", "keywords"],
         "properties": {"title": {"type": "string"}, "authors": {"type": "array", "items": {"type": "string"}},
                        "abstract": {"type": "string"}, "keywords": {"type": "array", "items": {"type": "string"}}}}
MODERATION = {"type": "object", "additionalProperties": False,
              "required": ["is_violating", "category", "explanation_if_violating"], "properties": {
                  "is_violating": {"type": "boolean"},
                  "category": {"type": ["string", "null"], "enum": ["violence", "sexual", "self_harm", None]},
                  "explanation_if_violating": {"type": ["string", "null"]}}}
ENTITIES = {"type": "object", "additionalProperties": False, "required": ["entities"], "properties": {
    "entities": {"type": "array", "items": {"type": "object", "additionalProperties": False,
                                            "required": ["text", "label", "start"],
                                            "properties": {"text": {"type": "string"},
                                                           "label": {"enum": ["PERSON", "ORG", "PLACE"]},
                                                           "start": {"type": "integer", "minimum": 0}}}}}}
CHAIN = {"type": "object", "required": ["thought", "action"], "additionalProperties": False, "properties": {
    "thought": {"type": "string"},
    "action": {"anyOf": [
        {"type": "object", "required": ["tool", "input"], "additionalProperties": False,
         "properties": {"tool": {"const": "search"}, "input": {"type": "string"}}},
        {"type": "object", "required": ["final"], "additionalProperties": False,
         "properties": {"final": {"type": "string"}}}]}}}
CLASSIFY = {"type": "object", "required": ["label", "scores"], "properties": {
    "label": {"enum": ["spam", "ham"]},
    "scores": {"type": "object", "properties": {"spam": {"type": "number", "minimum": 0, "maximum": 1},
                                                "ham": {"type": "number", "minimum": 0, "maximum": 1}},
               "required": ["spam", "ham"], "additionalProperties": False}}}
CALENDAR = {"type": "object", "additionalProperties": False, "required": ["name", "date", "participants"],
            "properties": {"name": {"type": "string"}, "date": {"type": "string"},
                           "participants": {"type": "array", "items": {"type": "string"}}}}
SQL = {"type": "object", "additionalProperties": False, "required": ["table_name", "columns", "conditions", "order_by"],
       "properties": {
           "table_name": {"type": "string", "enum": ["customers", "orders"]},
           "columns": {"type": "array", "items": {"type": "string", "enum": ["id", "name", "email", "amount"]}},
           "conditions": {"type": "array", "items": {"type": "object", "additionalProperties": False,
                                                     "required": ["column", "operator", "value"], "properties": {
               "column": {"type": "string"}, "operator": {"type": "string", "enum": ["=", ">", "<", ">=", "<=", "!="]},
               "value": {"anyOf": [{"type": "string"}, {"type": "number"},
                                   {"type": "object", "additionalProperties": False, "required": ["column_name"],
                                    "properties": {"column_name": {"type": "string"}}}]}}}},
           "order_by": {"type": "string", "enum": ["asc", "desc"]}}}
OPENAI_EXAMPLES = {"calendar-event": CALENDAR, "sql-query": SQL,
                   "math-reasoning": MATH, "ui-recursive": UI, "research-paper": PAPER, "moderation": MODERATION,
                   "entities": ENTITIES, "agent-step": CHAIN, "classifier": CLASSIFY}

# -- tool definitions' parameters ----------------------------------------------------------------------------

TOOLS = {
    "get_weather": {"type": "object", "properties": {
        "location": {"type": "string", "description": "City and country, e.g. Paris, France"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location", "unit"]},
    "search_web": {"type": "object", "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": 100},
        "max_results": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
        "recency_days": {"type": ["integer", "null"], "minimum": 1}}, "required": ["query"]},
    "create_calendar_event": {"type": "object", "properties": {
        "title": {"type": "string"}, "start": {"type": "string", "format": "date-time"},
        "end": {"type": "string", "format": "date-time"},
        "attendees": {"type": "array", "items": {"type": "string", "format": "email"}, "maxItems": 5,
                      "uniqueItems": True}}, "required": ["title", "start", "end"]},
    "run_sql": {"type": "object", "properties": {
        "query": {"type": "string", "pattern": "^SELECT "}, "limit": {"type": "integer", "exclusiveMinimum": 0,
                                                                      "maximum": 1000}},
        "required": ["query"], "additionalProperties": False},
    "send_email": {"type": "object", "properties": {
        "to": {"type": "array", "items": {"type": "string", "format": "email"}, "minItems": 1, "maxItems": 3},
        "subject": {"type": "string", "maxLength": 60}, "body": {"type": "string", "maxLength": 200},
        "cc": {"type": "array", "items": {"type": "string", "format": "email"}}}, "required": ["to", "subject"]},
    "book_flight": {"type": "object", "properties": {
        "from": {"type": "string", "pattern": "^[A-Z]{3}$"}, "to": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "date": {"type": "string", "format": "date"}, "passengers": {"type": "integer", "minimum": 1, "maximum": 9},
        "class": {"enum": ["economy", "business", "first"]}}, "required": ["from", "to", "date", "passengers"]},
    "set_thermostat": {"type": "object", "properties": {
        "temperature": {"type": "number", "minimum": 10, "maximum": 30, "multipleOf": 0.5},
        "zone": {"type": "string"}}, "required": ["temperature"]},
    "update_record": {"type": "object", "properties": {
        "id": {"type": "string", "format": "uuid"},
        "fields": {"type": "object", "patternProperties": {"^[a-z_]{1,20}$": {"type": ["string", "number",
                                                                                           "boolean", "null"]}},
                   "additionalProperties": False, "minProperties": 1}}, "required": ["id", "fields"]},
    "geocode": {"type": "object", "properties": {
        "coordinates": {"type": "array", "prefixItems": [{"type": "number", "minimum": -90, "maximum": 90},
                                                         {"type": "number", "minimum": -180, "maximum": 180}],
                        "items": False, "minItems": 2}}, "required": ["coordinates"]},
    "get_stock_price": {"type": "object", "properties": {
        "ticker": {"type": "string", "pattern": "^[A-Z]{1,5}$"}, "exchange": {"enum": ["NYSE", "NASDAQ"]}},
        "required": ["ticker"], "additionalProperties": False},
    "set_reminder": {"type": "object", "properties": {
        "text": {"type": "string", "maxLength": 80}, "at": {"type": "string", "format": "time"},
        "repeat": {"type": "string", "enum": ["never", "daily", "weekly"]}}, "required": ["text", "at"]},
    "calculate": {"type": "object", "properties": {
        "expression": {"type": "string", "pattern": "^[0-9+*/() .-]+$"},
        "precision": {"type": "integer", "minimum": 0, "maximum": 10}}, "required": ["expression"]},
    "translate": {"type": "object", "allOf": [
        {"properties": {"text": {"type": "string", "maxLength": 100}}, "required": ["text"]},
        {"properties": {"target": {"type": "string", "pattern": "^[a-z]{2}$"}}, "required": ["target"]}]},
}


def corpus() -> dict[str, Any]:
    schemas: dict[str, Any] = {f"pydantic:{m.__name__}": m.model_json_schema() for m in PYDANTIC}
    schemas |= {f"openai:{name}": s for name, s in OPENAI_EXAMPLES.items()}
    schemas |= {f"tool:{name}": s for name, s in TOOLS.items()}
    return schemas


def old_converter_accepts(schema: Any) -> bool:
    """Would pier before its own converter have taken the schema (llama-cpp-python's, 23 keywords refused)?"""
    from llama_cpp.llama_grammar import SchemaConverter

    if any(k in OLD_REFUSED for k in _keys(schema)):
        return False
    try:
        converter = SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
        converter.visit(converter.resolve_refs(json.loads(json.dumps(schema)), "input"), "")
    except Exception:  # any failure is a refusal, as pier reported it
        return False
    return True


def _keys(schema: Any) -> set[str]:
    if isinstance(schema, dict):
        return set(schema) | {k for v in schema.values() for k in _keys(v)}
    if isinstance(schema, list):
        return {k for v in schema for k in _keys(v)}
    return set()


def _valid(schema: Any, text: str) -> bool:
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return False
    cls = jsonschema.validators.validator_for(schema)
    return not any(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(document))


def _ask(url: str, **fields: Any) -> dict[str, Any]:
    body = {"prompt": "Answer in JSON:", "temperature": 0.8, "seed": 7, **fields}
    return httpx.post(url + "/v1/completions", json=body, timeout=300).json()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["tiny", "small"], default="tiny")
    parser.add_argument("--max-tokens", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    from pier.synthetic.builder import SMALL, TINY

    folder = Path(tempfile.mkdtemp())
    shape, quant = (TINY, "Q8_0") if args.model == "tiny" else (SMALL, "Q4_0")
    (folder / "model.gguf").symlink_to(cached_model(f"{args.model}-{quant.lower()}.gguf", shape, quant))
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "SAGEMAKER_BIND_TO_PORT": str(port),
           "PIER_HOST": "127.0.0.1", "PIER_THREADS": str(args.threads), "PIER_LOG_LEVEL": "warning"}
    server = subprocess.Popen([sys.executable, "-m", "pier.server.container", "--model", str(folder)], env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                if httpx.get(url + "/ping", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        _ask(url, max_tokens=8)  # warm up
        run(url, args.max_tokens, args.model)
    finally:
        server.terminate()
        server.wait(30)


def run(url: str, max_tokens: int, model: str) -> None:
    schemas = corpus()
    accepted = valid = old = finished = 0
    ttft: dict[str, list[float]] = {"grammar": [], "none": []}
    speed: dict[str, list[float]] = {"grammar": [], "none": []}
    print(f"{'schema':32s} {'old':>4s} {'new':>4s} {'valid':>5s} {'tokens':>6s} {'tok/s grammar':>13s} "
          f"{'tok/s none':>10s} checked after")
    for name, schema in schemas.items():
        was = old_converter_accepts(schema)
        old += was
        fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
        answer = _ask(url, max_tokens=max_tokens, response_format=fmt)
        if "choices" not in answer:
            print(f"{name:32s} {'yes' if was else 'no':>4s} {'no':>4s}  {answer.get('error', {}).get('message')}")
            continue
        accepted += 1
        choice = answer["choices"][0]
        done = choice["finish_reason"] == "stop"
        ok = done and _valid(schema, choice["text"])
        finished += done
        valid += ok
        timings = answer["timings"]
        n = timings["predicted_n"]
        plain = _ask(url, max_tokens=n, ignore_eos=True)["timings"]
        rates = []
        for kind, t in (("grammar", timings), ("none", plain)):
            ttft[kind].append(t["ttft_ms"])
            rate = (t["predicted_n"] - 1) / t["predicted_ms"] * 1000 if t["predicted_n"] > 1 else float("nan")
            if t["predicted_n"] > 1:
                speed[kind].append(rate)
            rates.append(rate)
        after = ",".join(choice.get("schema_check", {}).get("checked_after_generation", []))
        verdict = "yes" if ok else "NO" if done else "cut"
        print(f"{name:32s} {'yes' if was else 'no':>4s} {'yes':>4s} {verdict:>5s} {n:6d} "
              f"{rates[0]:13.0f} {rates[1]:10.0f} {after}")
    total = len(schemas)
    print(f"\n{model.upper()}: {total} schemas; accepted {accepted}/{total} (before: {old}/{total}); answers "
          f"finished within max_tokens {finished}/{accepted}, valid {valid}/{finished} of those ({accepted - finished} "
          "cut at max_tokens: random weights rarely close a free-text string)")
    for kind in ("grammar", "none"):
        print(f"{'with grammar' if kind == 'grammar' else 'without':13s} median time to first token "
              f"{statistics.median(ttft[kind]):6.1f} ms, median decode {statistics.median(speed[kind]):7.0f} tok/s")


if __name__ == "__main__":
    main()
