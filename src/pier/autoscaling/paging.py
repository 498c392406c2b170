"""MaxResults and NextToken for both services' Describe and List operations.

A NextToken names the last row a page held by its place in the answer's order (a record's insertion number, an
activity's number, a metric's sort key), not by an index: the next page starts after that row even when rows were
put or deleted between the two calls, so none is skipped or repeated (an index shifts when an earlier row goes)."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from typing import Any

Body = dict[str, Any]
Place = list[Any]  # JSON-comparable, increasing along the answer's order


def page(rows: Sequence[tuple[Place, Body]], reply_key: str, size: int, token: str | None,
         refuse: Callable[[str], Exception], token_key: str = "NextToken") -> Body:
    """One page of `rows` (in answer order, each with its place), after the row `token` names."""
    after = _decode(token, refuse, token_key) if token else None
    try:
        rest = [(place, row) for place, row in rows if after is None or place > after]
    except TypeError:  # a token of another operation: its places do not compare with these
        raise refuse(f"Invalid {token_key} {token!r}: pass the {token_key} of the previous answer unchanged.") from None
    reply: Body = {reply_key: [row for _, row in rest[:size]]}
    if len(rest) > size:
        reply[token_key] = _encode(rest[size - 1][0])
    return reply


def size_of(body: Body, key: str, default: int, most: int, refuse: Callable[[str], Exception]) -> int:
    """The page size asked for: AWS refuses one outside [1, most] (botocore checks neither bound here)."""
    size = body.get(key)
    if size is None:
        return default
    if not 1 <= size <= most:
        raise refuse(f"1 validation error detected: Value '{size}' at '{key[0].lower() + key[1:]}' failed to "
                     f"satisfy constraint: Member must have value between 1 and {most}.")
    return int(size)


def _encode(place: Place) -> str:
    return base64.urlsafe_b64encode(json.dumps(place).encode()).decode()


def _decode(token: str, refuse: Callable[[str], Exception], token_key: str) -> Place:
    try:
        place = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, binascii.Error, UnicodeError):
        place = None
    if not isinstance(place, list):
        raise refuse(f"Invalid {token_key} {token!r}: pass the {token_key} of the previous answer unchanged.")
    return place
