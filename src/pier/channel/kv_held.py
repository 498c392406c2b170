"""What a copy's prefix cache holds, as it tells the gateway: the header that carries it and its encoding.

A copy answers with `X-Pier-Kv-Held`: the prefix blocks (pier.channel.prefix's cumulative hashes of the prompt
TEXT, which both sides compute alike: the gateway cannot tokenize) of the prompts its engine keeps in its prefix
cache, most recently used first, comma-joined (pier.server.kv_report builds it). The gateway replaces what it
knew of that copy with it, so a prefix the copy evicted stops drawing requests, and a gateway that restarted
learns again from the first answers.
"""

from __future__ import annotations

from collections.abc import Iterable

from pier.channel.headers import KV_HELD_WANTED

WANTED = {KV_HELD_WANTED: "1"}  # KV_AWARE routing reads the report: only it asks
MAX_HELD = 256  # blocks per header: 24 hex digits and a comma each, about 6 KiB at most
_BLOCK_DIGITS = 24  # pier.channel.prefix hashes: blake2b of 12 bytes, in hex
_HEX = frozenset("0123456789abcdef")


def encode_held(blocks: Iterable[str], *, limit: int = MAX_HELD) -> str:
    """The header value for `blocks` (most recently used first): the first `limit` distinct ones."""
    kept: dict[str, None] = {}
    for block in blocks:
        if len(kept) >= limit:
            break
        kept[block] = None
    return ",".join(kept)


def decode_held(value: str | None, *, limit: int = MAX_HELD) -> tuple[str, ...] | None:
    """The blocks of a header value, malformed entries dropped; None when the copy sent no header (a copy that
    does not report: the gateway then keeps its own memory of what it sent there)."""
    if value is None:
        return None
    blocks = [b.strip() for b in value.split(",")]
    return tuple(b for b in blocks if len(b) == _BLOCK_DIGITS and set(b) <= _HEX)[:limit]
