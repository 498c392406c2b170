"""AddTags, ListTags and DeleteTags on the resources pier keeps (models, endpoint configs, endpoints, inference
components), and the `Tags` their Create* operations take. A resource's tags live in its record, so they go when it
goes and a resource made again under its name starts with none, as on SageMaker. The sagemaker SDK lists an
endpoint config's tags to copy them (Predictor.update_endpoint), so ListTags must answer for every kind pier has."""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated, Any

from pydantic import Field

from pier.control.errors import ValidationError, not_found
from pier.control.listing import offset
from pier.control.names import ARN_RESOURCE
from pier.control.records import Record
from pier.control.resource_store import Table
from pier.control.resources import Body, Resources
from pier.control.shape import Shape
from pier.control.validation_message import parse

MAX_TAGS = 50  # per resource, as SageMaker allows
RESERVED_PREFIX = "aws:"  # AWS's own tags; users may not set or remove them
# botocore's TagKey/TagValue pattern is ([\p{L}\p{Z}\p{N}_.:/=+\-@]*), which Python's re cannot spell: letters,
# separators (spaces) and numbers by Unicode category, and these.
_TAG_PUNCTUATION = frozenset("_.:/=+-@")
_ARN = re.compile(r"arn:aws[a-z-]*:sagemaker:[a-z0-9-]*:[0-9]{12}:(?P<resource>[a-z-]+)/(?P<name>.+)")
_KINDS = {word: kind for kind, word in ARN_RESOURCE.items()}


class TagSpec(Shape):
    Key: Annotated[str, Field(min_length=1, max_length=128)]
    Value: Annotated[str, Field(max_length=256)]


class AddTagsInput(Shape):
    ResourceArn: str
    Tags: Annotated[list[TagSpec], Field(max_length=MAX_TAGS)]


class DeleteTagsInput(Shape):
    ResourceArn: str
    TagKeys: Annotated[list[str], Field(min_length=1, max_length=MAX_TAGS)]


class ListTagsInput(Shape):
    ResourceArn: str
    NextToken: str | None = None
    MaxResults: Annotated[int, Field(ge=50)] = 50


def tags_of(request: Shape) -> dict[str, str]:
    """A Create* request's `Tags` (kept among its unmodelled members) as the record keeps them: key -> value, in
    the order given, a repeated key's last value winning; checked as AddTags checks them."""
    given = parse(AddTagsInput, {"ResourceArn": "", "Tags": (request.model_extra or {}).get("Tags") or []}).Tags
    _check_tags(given)
    return {tag.Key: tag.Value for tag in given}


class TagOperations(Resources):
    """The tag operations, for ControlPlane (api.py), which serves them with the rest."""

    def add_tags(self, body: Body, region: str) -> Body:
        request = parse(AddTagsInput, body)
        _check_tags(request.Tags)
        table, record = self._tagged(request.ResourceArn)
        tags = {**record.tags, **{tag.Key: tag.Value for tag in request.Tags}}
        if len(tags) > MAX_TAGS:
            raise ValidationError(
                f"{request.ResourceArn} has {len(record.tags)} tags; adding these would make {len(tags)}, and a "
                f"resource has at most {MAX_TAGS}: delete some with DeleteTags first.")
        table.put(record.model_copy(update={"tags": tags}))
        return {"Tags": [tag.wire() for tag in request.Tags]}

    def list_tags(self, body: Body, region: str) -> Body:
        request = parse(ListTagsInput, body)
        _, record = self._tagged(request.ResourceArn)
        tags = [{"Key": key, "Value": value} for key, value in record.tags.items()]
        start = offset(request.NextToken)
        end = start + request.MaxResults
        return {"Tags": tags[start:end], **({"NextToken": str(end)} if end < len(tags) else {})}

    def delete_tags(self, body: Body, region: str) -> Body:
        request = parse(DeleteTagsInput, body)
        _check_keys(request.TagKeys)
        table, record = self._tagged(request.ResourceArn)
        tags = {key: value for key, value in record.tags.items() if key not in request.TagKeys}
        table.put(record.model_copy(update={"tags": tags}))
        return {}

    def _tagged(self, resource_arn: str) -> tuple[Table[Any], Record]:
        """The table and record an ARN names. Written back with put, on the writer thread: the reconciler's own
        writes are compare-and-set (Table.replace), so a tag written meanwhile only delays its next status write."""
        match = _ARN.fullmatch(resource_arn)
        if match is None:
            raise ValidationError(
                f"ResourceArn {resource_arn!r} is not a SageMaker ARN: give the ARN a Create* or Describe* call "
                "answered, arn:aws:sagemaker:REGION:ACCOUNT:RESOURCE/NAME.")
        kind = _KINDS.get(match["resource"])
        if kind is None:
            raise ValidationError(
                f"pier keeps tags on models, endpoint configs, endpoints and inference components, not on "
                f"{match['resource']} resources ({resource_arn}).")
        table = self._table(kind)
        record = table.get(match["name"])
        if record is None:
            raise not_found(kind, resource_arn)
        return table, record

    def _table(self, kind: str) -> Table[Any]:
        tables: dict[str, Table[Any]] = {"model": self.state.models, "endpoint configuration": self.state.configs,
                                         "endpoint": self.state.endpoints,
                                         "inference component": self.state.components}
        return tables[kind]


def _check_tags(tags: list[TagSpec]) -> None:
    _check_keys([tag.Key for tag in tags])
    bad = [tag.Value for tag in tags if not _tag_text(tag.Value)]
    if bad:
        raise ValidationError(_pattern_message("tag value", bad[0]))


def _check_keys(keys: list[str]) -> None:
    reserved = [key for key in keys if key.lower().startswith(RESERVED_PREFIX)]
    if reserved:
        raise ValidationError(f"Tag key {reserved[0]!r} starts with {RESERVED_PREFIX!r}, which AWS reserves for its "
                              "own tags: choose another key.")
    bad = [key for key in keys if not _tag_text(key)]
    if bad:
        raise ValidationError(_pattern_message("tag key", bad[0]))


def _tag_text(text: str) -> bool:
    return all(c in _TAG_PUNCTUATION or unicodedata.category(c)[0] in "LZN" for c in text)


def _pattern_message(what: str, text: str) -> str:
    return (f"1 validation error detected: Value '{text}' at '{what}' failed to satisfy constraint: Member must "
            r"satisfy regular expression pattern: ^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$. Tags hold letters, digits, "
            "spaces and _ . : / = + - @.")
