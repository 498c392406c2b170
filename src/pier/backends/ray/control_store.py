"""The Ray cluster's control store (the head's GCS) away: killed, restarting, or loading its tables back from Redis
(GCS fault tolerance). Meanwhile Ray can neither reserve an instance nor start an actor (those calls block until it
is back), while the actors already running answer calls as before. So a copy that has to be placed waits, STARTING
and saying why, and the wait is not counted as a failed start; running copies go on taking traffic."""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from pier.backends.base import CopyState
from pier.backends.ray.ray_calls import _blocking, _control_store_answers
from pier.backends.ray.remote_copy import RemoteCopy

log = logging.getLogger("pier.backends.ray")

PROBE_S = 2.0  # how long the control store may take to say it is there before it counts as away
HEAD_AWAY = ("waiting for the Ray cluster's control store (the head's GCS) to answer: no copy is placed while the "
             "head is away, copies already running keep serving; this copy starts once the head is back")


async def answers(call_s: float) -> bool:
    """Whether the control store answers now (a probe that itself hangs longer than `call_s` counts as away)."""
    try:
        return await _blocking(partial(_control_store_answers, PROBE_S), PROBE_S + call_s)
    except TimeoutError:
        return False


async def until_answers(copy: RemoteCopy, pause_s: float, call_s: float) -> None:
    """Return once the control store answers; until then the copy says it waits for the head, in its status and,
    once, in its log."""
    away = False
    while not await answers(call_s):
        if not away:
            copy.mirror.note(HEAD_AWAY)
            log.warning("copy %s: %s", copy.spec.copy_id, HEAD_AWAY)
            away = True
        copy.set(CopyState.STARTING, HEAD_AWAY)
        await asyncio.sleep(pause_s)
    if away:
        copy.mirror.note("the Ray cluster's control store answers again: placing the copy")
