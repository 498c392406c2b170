"""Ray, kept at arm's length: imported only when the backend connects, and called on threads of its own so that a
cluster going away never holds up the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, TypeVar

from pier.backends.ray.actor import ActorSetup, CopyActor
from pier.backends.ray.config import RayConfig
from pier.backends.ray.placement import actor_name
from pier.backends.ray.remote_copy import RemoteCopy

log = logging.getLogger("pier.backends.ray")

T = TypeVar("T")


class RayUnavailable(RuntimeError):
    """Ray is not installed, or the cluster cannot be reached; the message says what to do."""


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailable("The ray backend needs Ray: pip install 'pier[ray]' (on the gateway and on every node "
                             "of the cluster, the same version).") from None
    return ray


def _reset(ray: Any) -> Callable[[], None]:
    """Undo a failed ray.init's half-made connection, so that the next attempt starts clean."""
    def reset() -> None:
        with contextlib.suppress(Exception):  # nothing was connected: nothing to undo
            ray.shutdown()
    return reset


_ACTOR_CLASS: Any = None


def _actor_class() -> Any:
    global _ACTOR_CLASS
    if _ACTOR_CLASS is None:
        import ray

        _ACTOR_CLASS = ray.remote(CopyActor)
    return _ACTOR_CLASS


class _Gone(Exception):
    """The copy's actor is gone (or never came up); the message says why, in words."""


def new_actor(copy: RemoteCopy, setup: ActorSetup, handle: Any, bundle: Mapping[str, float], config: RayConfig
              ) -> Any:
    """The copy's detached actor, named after it, in its instance's placement group (`handle`); one of an earlier
    start still holding the name is killed first. Blocking."""
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    name = actor_name(copy.spec.copy_id)
    options: dict[str, Any] = {
        "name": name, "namespace": config.namespace, "lifetime": "detached", "max_restarts": 0,
        "num_cpus": 0, "scheduling_strategy": PlacementGroupSchedulingStrategy(handle, 0),
    }
    gpus = min(copy.spec.accelerators * config.gpus_per_accelerator, bundle.get("GPU", 0.0))
    if gpus:
        options["num_gpus"] = gpus  # the actor hands the GPUs Ray gives it to its copy (CopyActor.start)
    for attempt in range(20):
        try:
            return _actor_class().options(**options).remote(copy.spec, copy.secret, setup)
        except ValueError:  # the name is taken: an actor of an earlier start that is not gone yet
            if attempt == 0:
                log.warning("copy %s: an actor named %s still runs; replacing it", copy.spec.copy_id, name)
            if _exists(name):
                _kill(ray.get_actor(name))
            time.sleep(0.25)
    raise _Gone(f"the actor name {name} stays taken in namespace {config.namespace}")


def _awaitable(ref: Any) -> Any:
    """An ObjectRef as an asyncio future (Ray's refs are awaitable, but wait_for wants a future or coroutine)."""
    return asyncio.wrap_future(ref.future())


def _exists(name: str) -> bool:
    import ray

    try:
        ray.get_actor(name)
    except ValueError:
        return False
    return True


def _kill(actor: Any) -> None:
    import ray

    if actor is not None:
        with contextlib.suppress(Exception):  # already dead, or its node is gone: nothing left to kill
            ray.kill(actor, no_restart=True)


def _control_store_answers(timeout_s: float) -> bool:
    """Whether the cluster's control store (the head's GCS) answers within `timeout_s`. While it does not, Ray can
    neither reserve an instance nor start an actor (those calls block until it is back), but the actors already
    running answer calls as before. Through Ray Client this process has no GCS connection to ask: assume it does."""
    from ray._private.worker import global_worker
    from ray.util.client import ray as client

    if client.is_connected():
        return True
    worker: Any = global_worker  # its GCS client is set when it connects
    try:
        worker.gcs_client.check_alive([], timeout=timeout_s)
    except Exception:  # refused, or no answer in time: away (or restarting) either way
        return False
    return True


def _death(error: BaseException) -> str:
    """Why an actor died, in a few words (Ray's own message runs to many lines)."""
    if isinstance(error, TimeoutError):
        return "its Ray actor did not answer in time"
    text = str(error)
    if "node has died" in text or "node was" in text:
        return "its Ray node died"
    if "worker process has died" in text or ("exit" in text.lower() and "worker" in text.lower()):
        return "its Ray actor's process died"
    if "ray.kill" in text:
        return "its Ray actor was killed"
    if "placement group" in text.lower():
        return "its instance's placement group was removed"
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(error).__name__)
    return f"its Ray actor failed ({first[:200]})"


async def _blocking(work: Callable[[], T], timeout_s: float | None = None) -> T:
    """A blocking call into Ray on a daemon thread of its own: a call into a cluster that is going away may never
    return, and must neither hold up the event loop nor keep the gateway from exiting."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not future.done():
            outcome()

    def run() -> None:
        try:
            result = work()
        except BaseException as error:
            done = partial(future.set_exception, error)
        else:
            done = partial(future.set_result, result)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, done)

    threading.Thread(target=run, name="pier-ray-call", daemon=True).start()
    return await (asyncio.wait_for(future, timeout_s) if timeout_s is not None else future)


async def _cancel(task: asyncio.Task[None] | None) -> None:
    if task is not None and not task.done():
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
