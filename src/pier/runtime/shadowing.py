"""Shadow variants: a request's copy sent to the endpoint's shadow variant beside the production answer, in a
task of its own. Its answer is read and discarded (or captured), its failures logged and counted by the
observer under the shadow's variant; nothing of it reaches the client or holds up its answer. At most `limit`
copies are in flight: past that a shadow request is skipped, so a slow shadow never piles up work."""

from __future__ import annotations

import asyncio
import logging

from pier.channel.prefix import request_prefix
from pier.runtime.attempts import Call, Forwarder, answer_of
from pier.runtime.invocation import Invocation
from pier.runtime.routing_strategy import request_routing
from pier.runtime.tap import Tap, exchange_of
from pier.runtime.target import Resolve, resolve_target

log = logging.getLogger(__name__)


class Shadowing:
    def __init__(self, forwarder: Forwarder, resolve: Resolve, tap: Tap, *, limit: int = 64) -> None:
        self.forwarder = forwarder
        self.resolve = resolve
        self.tap = tap
        self.limit = limit
        self.skipped = 0  # shadow requests not sent: `limit` were in flight
        self._tasks: set[asyncio.Task[None]] = set()

    def mirror(self, invocation: Invocation, shadows: tuple[str, ...]) -> None:
        """Send `invocation` to each shadow variant, in the background."""
        for variant in shadows:
            if len(self._tasks) >= self.limit:
                self.skipped += 1
                log.warning("shadow variant %s of %s skipped a request: %d shadow requests in flight", variant,
                            invocation.endpoint, len(self._tasks))
                continue
            task = asyncio.create_task(self._send(invocation, variant), name=f"shadow {variant}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _send(self, invocation: Invocation, variant: str) -> None:
        try:
            target = await resolve_target(self.resolve, invocation.endpoint, None, variant)
            plan = self.tap.plan(invocation.endpoint, variant)
            deadline_s = self.forwarder.settings.deadline_s
            call = Call(invocation.endpoint, target, "/invocations", invocation.body, invocation.upstream_headers(),
                        request_prefix(invocation.body), asyncio.get_running_loop().time() + deadline_s, deadline_s,
                        route=request_routing(target.routing, invocation.body, prefix_id=invocation.prefix_aware_id))
            async with answer_of(self.forwarder, call) as answer:
                body = await answer.read()
                status, content_type = answer.head.status_code, answer.head.headers.get("content-type")
            if plan.capture and 200 <= status < 300:
                self.tap.exchanged(exchange_of(invocation, variant, body, content_type))
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the shadow's own business: its metrics say it failed
            log.info("shadow variant %s of %s failed a request: %s", variant, invocation.endpoint, error)
