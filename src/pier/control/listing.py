"""List* operations: filter, sort and page summaries as SageMaker does (newest first unless told otherwise)."""

from __future__ import annotations

import base64
import json
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
    """One page of summaries, and the NextToken for the next page (None on the last).

    The token holds the sort key of the page's last row, and the next page starts after that key: resources
    created or deleted between two pages (a client deleting each page's resources as it goes) neither skip nor
    repeat the others, as an offset would."""
    descending = query.SortOrder == "Descending"
    kept = sorted((r for r in rows if _matches(r, query)), key=lambda r: _sort_key(r, query.SortBy),
                  reverse=descending)
    if query.NextToken is not None:
        after = _after(query.NextToken, query)
        kept = [r for r in kept if (_sort_key(r, query.SortBy) < after if descending
                                    else _sort_key(r, query.SortBy) > after)]
    shown = kept[: query.MaxResults]
    more = len(kept) > query.MaxResults
    return [r.summary for r in shown], (_token(_sort_key(shown[-1], query.SortBy), query) if more else None)


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


def _token(key: tuple[Any, ...], query: ListInput) -> str:
    text = json.dumps([query.SortBy, query.SortOrder, *key], separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _after(token: str, query: ListInput) -> tuple[Any, ...]:
    """The sort key a NextToken says the next page starts after."""
    try:
        sort_by, order, *key = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, TypeError):
        raise _bad_token(token) from None
    if (sort_by, order) != (query.SortBy, query.SortOrder):
        raise ValidationError(f"This NextToken belongs to a listing sorted by {sort_by} {order}: pass the NextToken "
                              "of the previous page unchanged, with the same SortBy and SortOrder.")
    example = _sort_key(_EXAMPLE, sort_by)
    if len(key) != len(example) or any(isinstance(k, str) != isinstance(e, str) or isinstance(k, bool | None)
                                       for k, e in zip(key, example, strict=False)):
        raise _bad_token(token)
    return tuple(key)


_EXAMPLE = Row("", 0.0, {}, status="")


def _bad_token(token: str) -> ValidationError:
    shown = token if len(token) <= 40 else token[:37] + "..."
    return ValidationError(f"Invalid NextToken {shown!r}: pass the NextToken of the previous page unchanged.")


def offset(token: str | None) -> int:
    """Where the page a NextToken asks for starts, as an offset (ListTags: a resource's tags change only by the
    caller's own calls)."""
    if token is None:
        return 0
    if not (token.isascii() and token.isdigit() and len(token) <= 12):
        raise _bad_token(token)
    return int(token)
