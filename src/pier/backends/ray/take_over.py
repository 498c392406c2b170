"""Taking over the copies on the cluster: a gateway that starts to lead (after a restart, or when the leader before
it is gone) finds the detached actors named `pier-copy-<copy_id>` in pier's namespace, asks each who it is, and
keeps each one whose model server runs, as it is (its process, URL and secret unchanged). Instances none of them
uses are removed.

An actor is killed instead, and the reconciler starts its copy again if it is still wanted (its copy is not among
the backend's, so the next tick starts it; a new actor replaces one whose name is still taken):
- it does not say who it is within TAKE_OVER_S: dead, its node cut off, or still being created by a leader that
  died meanwhile (nobody would ever finish creating it: a leader's keepers end with its leadership, and the new
  leader starts only after the old one stopped, gateway/leadership.py);
- it answers but its model server is not running: the leader before was still getting the model onto its node
  (nobody would start it), or had begun to stop it.
Only the leader takes over (followers never touch an actor), so an actor the leader is creating is never killed.
"""

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

TAKE_OVER_S = 30.0  # how long a new leader waits for the actors it finds to say who they are


def adoptable(answer: Any) -> str:
    """Why the actor that gave `answer` to identity() cannot be taken over ("" when it can): an exception is how
    the call failed."""
    if isinstance(answer, BaseException):
        from ray.exceptions import GetTimeoutError

        return "no answer in time" if isinstance(answer, GetTimeoutError) else type(answer).__name__
    if not isinstance(answer, Identity):
        return f"an answer of a pier this one cannot read ({type(answer).__name__})"
    if not answer.serving:
        return "its model server is not running (the gateway before stopped while starting or stopping it)"
    return ""


def as_it_is(identity: Identity, mirror: LogMirror, actor: Any) -> RemoteCopy:
    """The copy of the actor that answered `identity`, in the state the actor gave (a ready copy is routed to at
    once, by the new leader and by the followers it publishes to, not only after the keeper's first report)."""
    copy = RemoteCopy(identity.spec, identity.secret, mirror, actor=actor, group=identity.group,
                      node_id=identity.node_id, adopted=True, message="taken over from an earlier gateway")
    status = identity.status
    if status is not None:
        copy.url, copy.pid, copy.process_restarts = status.url, status.pid, status.restarts
        copy.concurrency, copy.kernels = status.concurrency, status.kernels
        copy.set(status.state, status.message)
    return copy


def take_over(groups: Groups, folder: Callable[[str], Path], cancelled: Callable[[], bool] = lambda: False
              ) -> list[RemoteCopy]:
    """Adopt every copy actor in the namespace that can be (each into `groups`, its log mirrored under
    `folder(copy_id)`); kill the others; remove instances none of the adopted uses. Blocking: run on a thread.
    Once `cancelled()` (the gateway stopped leading meanwhile) nothing is killed or removed any more."""
    import ray

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
        except Exception as error:  # dead, or still being created
            answer = error
        why = adoptable(answer)
        if why:
            if cancelled():
                continue
            log.warning("copy actor %s cannot be taken over (%s); removing it; the reconciler starts its copy again "
                        "if it is still wanted", name, why)
            _kill(handles[name])
            continue
        identity: Identity = answer
        spec = identity.spec
        copy = as_it_is(identity, LogMirror(folder(spec.copy_id)), handles[name])
        copy.mirror.note(f"taken over by a new gateway: actor on node {identity.node_id} ({identity.address})")
        groups.adopt(spec.copy_id, identity.group, instance_of(spec).variant)
        adopted.append(copy)
    if adopted:
        log.info("took over %d copies running on the cluster: %s", len(adopted),
                 ", ".join(copy.spec.copy_id for copy in adopted))
    if not cancelled():
        groups.sweep()
    return adopted
