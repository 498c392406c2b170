"""One leader for the loops (gateway/leadership.py): on one PostgreSQL, exactly one of two gateways leads, the other
names it; when the leader's connection is cut it stops leading before the other starts, and the other takes over."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from pier.gateway.leadership import Leadership
from tests.postgres import PostgresServer

# Short, yet with room for a loaded CI machine: a renewal late past deadline_s ends a lead (and fails the test).
FAST = {"renew_s": 0.2, "deadline_s": 1.5, "grace_s": 2.0}


class Loops:
    """Stands in for the leader's loops: counts who runs them, and the most that ever ran at once."""

    def __init__(self) -> None:
        self.running: set[str] = set()
        self.most = 0
        self.started: list[str] = []

    def of(self, name: str):  # type: ignore[no-untyped-def]
        async def lead() -> None:
            self.running.add(name)
            self.started.append(name)
            self.most = max(self.most, len(self.running))
            try:
                await asyncio.Event().wait()
            finally:
                self.running.discard(name)

        return lead


async def until(check, timeout_s: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout_s):
        while not check():
            await asyncio.sleep(0.05)


def test_without_a_database_the_gateway_leads() -> None:
    loops = Loops()
    alone = Leadership(None, "only")

    async def main() -> None:
        task = asyncio.create_task(alone.run(loops.of("only")))
        await until(lambda: loops.running == {"only"})
        task.cancel()

    asyncio.run(main())
    assert alone.role.leading and alone.role.leader == "only"


def test_one_leads_the_other_follows_and_takes_over_when_the_leader_is_cut_off(
        postgres_server: PostgresServer) -> None:
    url = postgres_server.database()
    loops = Loops()
    a, b = Leadership(url, "gateway-a", **FAST), Leadership(url, "gateway-b", **FAST)

    async def main() -> None:
        first = asyncio.create_task(a.run(loops.of("gateway-a")))
        await until(lambda: a.role.leading)
        second = asyncio.create_task(b.run(loops.of("gateway-b")))
        await until(lambda: b.role.leader == "gateway-a")
        assert not b.role.leading and loops.running == {"gateway-a"}
        with psycopg.connect(url, autocommit=True) as admin:  # the leader's session dies (a kill, a network cut)
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pier' "
                          "AND pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory')")
        await until(lambda: loops.running == {"gateway-b"})
        assert b.role.leading and b.role.leader == "gateway-b" and b.role.term == 2
        await until(lambda: a.role.leader == "gateway-b")  # the old leader follows now, and says who leads
        assert not a.role.leading
        for task in (first, second):
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())
    assert loops.most == 1  # never two leaders at once
    assert loops.started == ["gateway-a", "gateway-b"]


def test_the_grace_before_leading_outlasts_the_holders_deadline() -> None:
    with pytest.raises(ValueError, match="longer than the holder's deadline"):
        Leadership("postgresql://x@/y", "a", deadline_s=3.0, grace_s=2.0)
