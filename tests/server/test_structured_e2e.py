"""Structured output as a user writes it, on a real copy process of a random-weight TINY model, with the `openai`
client: a pydantic model with numeric bounds, array sizes, a pattern, a date format and $defs, through
`chat.completions.parse`; every answer parses into the model (the client's own pydantic validation)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Annotated

import jsonschema
import openai
import pytest
from pydantic import BaseModel, Field

from tests.server.processes import ContainerProcess

pytestmark = pytest.mark.e2e


class Address(BaseModel):
    zip: str = Field(pattern=r"^[0-9]{5}$")
    city: str = Field(max_length=12)


class Person(BaseModel):
    age: int = Field(ge=18, le=99)
    score: float = Field(gt=0, le=5)
    born: datetime.date
    home: Address
    tags: list[Annotated[str, Field(max_length=8)]] = Field(min_length=1, max_length=3)
    nick: str | None = Field(default=None, max_length=6)


def test_a_pydantic_schema_with_bounds_sizes_pattern_date_and_defs_holds_three_times_of_three(
        model_dir: Path, tmp_path: Path) -> None:
    schema = Person.model_json_schema()
    assert {"$defs", "minimum", "exclusiveMinimum", "pattern", "format", "minItems", "maxItems"} <= set(
        json.dumps(schema).replace('"', " ").split())  # the keywords this test is about are in the schema
    with ContainerProcess(model_dir, tmp_path / "log") as server:
        server.wait_ready()
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", timeout=120, max_retries=0)
        answers = [client.chat.completions.parse(
            model="tiny", messages=[{"role": "user", "content": "Describe a person."}], response_format=Person,
            temperature=1.0, seed=seed, max_tokens=400) for seed in (1, 2, 3)]
    assert "Traceback" not in server.output(), server.output()
    for answer in answers:
        choice = answer.choices[0]
        assert choice.finish_reason == "stop", choice
        assert isinstance(choice.message.parsed, Person)
        jsonschema.validate(json.loads(choice.message.content or ""), schema,
                            format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
