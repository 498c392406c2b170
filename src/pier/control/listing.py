"""List* operations: filter, sort and page summaries as SageMaker does (newest first unless told otherwise)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pier.control.errors import ValidationError
from pier.control.shapes import ListInput


@dataclass(frozen=True)
class Row:
    name: str
    created: float
    summary: dict[str, Any]  # what the List* operation returns for this resource
    modified: float | None = None
    status: str | None = None
    labels: dict[str, str] = field(default_factory=dict)  # EndpointName / VariantName, for the *Equals filters


def page(rows: Sequence[Row], query: ListInput) -> tuple[list[dict[str, Any]], str | None]:
    """One page of summaries, and the NextToken for the next page (None on the last)."""
    kept = sorted((r for r in rows if _matches(r, query)), key=lambda r: _sort_key(r, query.SortBy),
                  reverse=query.SortOrder == "Descending")
    start = offset(query.NextToken)
    end = start + query.MaxResults
    return [r.summary for r in kept[start:end]], (str(end) if end < len(kept) else None)


def _matches(row: Row, query: ListInput) -> bool:
    endpoint = row.labels.get("EndpointName", "").lower()
    checks = [
        query.NameContains is None or query.NameContains.lower() in row.name.lower(),
        query.CreationTimeBefore is None or row.created < query.CreationTimeBefore,
        query.CreationTimeAfter is None or row.created > query.CreationTimeAfter,
        query.LastModifiedTimeBefore is None or (row.modified or row.created) < query.LastModifiedTimeBefore,
        query.LastModifiedTimeAfter is None or (row.modified or row.created) > query.LastModifiedTimeAfter,
        query.StatusEquals is None or row.status == query.StatusEquals,
        query.EndpointNameEquals is None or endpoint == query.EndpointNameEquals.lower(),
        query.VariantNameEquals is None or row.labels.get("VariantName") == query.VariantNameEquals,
    ]
    return all(checks)


def _sort_key(row: Row, by: str) -> tuple[Any, ...]:
    if by == "Name":
        return (row.name.lower(),)
    if by == "Status":
        return (row.status or "", row.name.lower())
    return (row.created, row.name.lower())


def offset(token: str | None) -> int:
    """Where the page a NextToken asks for starts."""
    if token is None:
        return 0
    if not (token.isascii() and token.isdigit() and len(token) <= 12):
        shown = token if len(token) <= 40 else token[:37] + "..."
        raise ValidationError(f"Invalid NextToken {shown!r}: pass the NextToken of the previous page unchanged.")
    return int(token)
