"""How a component's requests are spread over its copies: the variant's RoutingConfig, as the copy chooser applies it.

- no RoutingConfig (pier's default) and `KV_AWARE`: the least busy copy with room, unless a copy that recently
  served the same prompt prefix is nearly as free (its prefix cache then skips that work): AWS's KV_AWARE.
- `LEAST_OUTSTANDING_REQUESTS`: the copy with the fewest requests in flight, nothing else.
- `RANDOM`: any copy with room, uniformly.
- `PREFIX_AWARE`: requests whose first `prefix_length` bytes of body (characters of an OpenAI request's messages)
  are equal, and whose PrefixAwareId (the runtime's optional routing hint) is too, go to one copy
  (highest-random-weight hashing: the same copy for the same prefix while the set of copies stays, and only the
  prefixes of a copy that leaves move), until it has `concurrency_threshold` in flight; then to the next copy in the
  same hashed order that is under the threshold; when every copy is at it, the least busy.

Whatever the strategy, a copy at its concurrency is never chosen (the request waits in admission instead), and a
request of a stateful session goes to its session's copy (`RequestRouting.pin`). On a multi-model endpoint, the
copies that hold the request's TargetModel (`RequestRouting.model`) are the only candidates while one of them has
room, so a model is loaded on another copy only when those are full or there are none.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum


class Strategy(StrEnum):
    LEAST_OUTSTANDING_REQUESTS = "LEAST_OUTSTANDING_REQUESTS"
    RANDOM = "RANDOM"
    PREFIX_AWARE = "PREFIX_AWARE"
    KV_AWARE = "KV_AWARE"


@dataclass(frozen=True)
class Routing:
    """A variant's RoutingConfig. `strategy` None is pier's default (KV_AWARE's behaviour)."""

    strategy: Strategy | None = None
    prefix_length: int = 0  # PREFIX_AWARE: bytes of body, or characters of messages, that make the prefix
    concurrency_threshold: int = 0  # PREFIX_AWARE: in-flight requests at which a prefix overflows to another copy

    @property
    def prefix_aware(self) -> bool:
        return self.strategy is Strategy.PREFIX_AWARE


DEFAULT_ROUTING = Routing()


@dataclass(frozen=True)
class RequestRouting:
    """What one request brings to a routing decision beyond its prefix blocks."""

    routing: Routing = DEFAULT_ROUTING
    key: str | None = None  # PREFIX_AWARE: the hash of its routing prefix (see `prefix_key`)
    pin: str | None = None  # the only copy it may go to (a stateful session's)
    model: str | None = None  # a multi-model endpoint's TargetModel: copies that hold it come first


DEFAULT_REQUEST_ROUTING = RequestRouting()


def request_routing(routing: Routing, prefix: bytes | str, pin: str | None = None, model: str | None = None, *,
             prefix_id: str | None = None) -> RequestRouting:
    """A request's route: `prefix` is its body (SageMaker runtime) or its messages' text (OpenAI), of which the
    first `prefix_length` bytes or characters make its PREFIX_AWARE key, with `prefix_id` (PrefixAwareId) if given."""
    key = prefix_key(prefix[: routing.prefix_length], prefix_id) if routing.prefix_aware else None
    return RequestRouting(routing, key, pin, model)


def prefix_key(prefix: bytes | str, prefix_id: str | None = None) -> str:
    """The PREFIX_AWARE key of `prefix`; a `prefix_id` makes its own key for the same prefix (AWS: applications whose
    prompts share a prefix each set their own id, so their requests are routed apart)."""
    data = prefix.encode("utf-8", "surrogatepass") if isinstance(prefix, str) else prefix
    if prefix_id is not None:  # the unit separator cannot occur in an id (printable ASCII)
        data = prefix_id.encode() + b"\x1f" + data
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def rendezvous_order(key: str, copy_ids: list[str]) -> list[str]:
    """`copy_ids` by their highest-random weight for `key`, best first: each key gets its own stable order."""
    def weight(copy_id: str) -> bytes:
        return hashlib.blake2b(f"{key}\x1f{copy_id}".encode(), digest_size=8).digest()

    return sorted(copy_ids, key=weight, reverse=True)
