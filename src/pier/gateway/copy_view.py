"""The copies this gateway sees, for what it lists and scrapes (`/pier/copies`, the copies' logs, `/metrics`, the
console's summary): its backend's while it leads (or alone on a state folder), the copy board's while it follows
(what the leader last published), so every gateway behind a load balancer answers alike. Routing has its own
choice of the two (`copy_board.routed`), made the same way."""

from __future__ import annotations

import asyncio

from pier.backends.base import Backend, CopyStatus
from pier.control.reconciler import Reconciler
from pier.gateway.copy_board import led_copies
from pier.gateway.listed_copy import ListedCopy, placement
from pier.gateway.parts import Gateway


def own_copies(backend: Backend, reconciler: Reconciler, owner: str) -> list[ListedCopy]:
    """The copies this gateway's backend runs, each with how its router sees it, where it runs and its log."""
    statuses = backend.statuses()
    routed = {copy.copy_id: copy for copy in led_copies(statuses, reconciler.copies)}
    return [ListedCopy(status, routed.get(status.copy_id, status), placement(reconciler.spec(status.copy_id)),
                       backend.log_file(status.copy_id), owner) for status in statuses]


def follows(gateway: Gateway) -> bool:
    """True while another gateway owns the copies (this one shares a database and does not lead)."""
    return gateway.copy_board is not None and not gateway.leadership.role.leading


async def seen_copies(gateway: Gateway) -> list[ListedCopy]:
    """A follower reads the board off the event loop (it may read the database); a leader's own are in memory."""
    if gateway.copy_board is not None and follows(gateway):
        return await asyncio.to_thread(gateway.copy_board.listed)
    return own_copies(gateway.backend, gateway.reconciler, gateway.leadership.me)


async def seen_statuses(gateway: Gateway) -> list[CopyStatus]:
    """The copies seen, as their backend reports them (with their URLs and secrets: what a scrape needs)."""
    return [copy.status for copy in await seen_copies(gateway)]


async def copy_log(gateway: Gateway, copy_id: str, lines: int) -> str:
    """The end of a seen copy's log: from this gateway's backend while it leads, else where the leader's backend
    says it is (the actor's node with ray, the leader's log file with the local backend when this host sees it).
    Raises KeyError or ValueError with what to do."""
    if not follows(gateway):
        return await asyncio.to_thread(gateway.backend.logs, copy_id, lines)
    listed = {copy.status.copy_id: copy for copy in await seen_copies(gateway)}
    copy = listed.get(copy_id)
    leader = (copy.owner if copy else None) or gateway.leadership.role.leader or "not known yet"
    try:
        return await gateway.backend.logs_elsewhere(copy_id, lines, copy.log_file if copy else None)
    except KeyError as error:
        message = error.args[0] if error.args else str(error)
        raise KeyError(f"{message} This gateway follows; copy {copy_id} is the leader's ({leader}): read its log "
                       "through the leader (GET /pier says who leads).") from None
