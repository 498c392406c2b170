"""Taking over the copies an earlier gateway left running: a gateway that starts again finds the detached actors
named `pier-copy-<copy_id>` in pier's namespace, asks each who it is, and keeps the ones that answer; the rest are
killed (the reconciler starts their copies again if they are still wanted), and instances none uses are removed."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pier.backends.ray.actor import Identity
from pier.backends.ray.groups import Groups
from pier.backends.ray.log_mirror import LogMirror
from pier.backends.ray.placement import ACTOR_PREFIX, instance_of
from pier.backends.ray.ray_calls import _kill
from pier.backends.ray.remote_copy import RemoteCopy

log = logging.getLogger("pier.backends.ray")

TAKE_OVER_S = 30.0  # how long a new gateway waits for the actors it finds to say who they are


def take_over(groups: Groups, folder: Callable[[str], Path]) -> list[RemoteCopy]:
    """Adopt every copy actor in the namespace (each into `groups`, its log mirrored under `folder(copy_id)`);
    remove instances none of them uses. Blocking: called from connect()."""
    import ray
    from ray.exceptions import GetTimeoutError

    handles: dict[str, Any] = {}
    for name in sorted(ray.util.list_named_actors()):
        if name.startswith(ACTOR_PREFIX):
            with contextlib.suppress(ValueError):  # gone since it was listed
                handles[name] = ray.get_actor(name)
    asked = {name: handle.identity.remote() for name, handle in handles.items()}
    if asked:
        ray.wait(list(asked.values()), num_returns=len(asked), timeout=TAKE_OVER_S)
    adopted: list[RemoteCopy] = []
    for name, ref in asked.items():
        try:
            answer: Any = ray.get(ref, timeout=0)
            identity: Identity = answer
        except Exception as error:  # dead, still being created, or of a pier this one cannot read
            why = "no answer in time" if isinstance(error, GetTimeoutError) else type(error).__name__
            log.warning("copy actor %s left by an earlier gateway cannot be taken over (%s); removing it; the "
                        "reconciler starts its copy again if it is still wanted", name, why)
            _kill(handles[name])
            continue
        spec = identity.spec
        copy = RemoteCopy(spec, identity.secret, LogMirror(folder(spec.copy_id)), actor=handles[name],
                          group=identity.group, node_id=identity.node_id, adopted=True,
                          message="taken over from an earlier gateway")
        copy.mirror.note(f"taken over by a new gateway: actor on node {identity.node_id} ({identity.address})")
        groups.adopt(spec.copy_id, identity.group, instance_of(spec).variant)
        adopted.append(copy)
    if adopted:
        log.info("took over %d copies running on the cluster: %s", len(adopted),
                 ", ".join(copy.spec.copy_id for copy in adopted))
    groups.sweep()
    return adopted
