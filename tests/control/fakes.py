"""A Backend that runs nothing: copies change state when a test says so (or at once, with `auto_ready`)."""

from __future__ import annotations

import dataclasses

from pier.backends.base import Capabilities, CopySpec, CopyState, CopyStatus


class FakeBackend:
    name = "fake"
    capabilities = Capabilities()  # copies on this host's cores, no processes of their own

    def __init__(self, *, auto_ready: bool = True) -> None:
        self.auto_ready = auto_ready
        self.specs: dict[str, CopySpec] = {}
        self.copies: dict[str, CopyStatus] = {}
        self.started: list[str] = []
        self.stopped: list[str] = []
        self.closed = False
        self.leading = 0  # take_over() less let_go() calls: 1 while the gateway leads

    async def start(self, spec: CopySpec) -> None:
        self.specs[spec.copy_id] = spec
        self.started.append(spec.copy_id)
        state = CopyState.READY if self.auto_ready else CopyState.STARTING
        port = 40000 + len(self.started)
        self.copies[spec.copy_id] = CopyStatus(spec.copy_id, spec.component, state, f"http://127.0.0.1:{port}",
                                               pid=port)

    async def stop(self, copy_id: str) -> None:
        self.stopped.append(copy_id)
        self.copies.pop(copy_id, None)
        self.specs.pop(copy_id, None)

    async def take_over(self) -> None:
        self.leading += 1

    async def let_go(self) -> None:
        self.leading -= 1

    def statuses(self) -> list[CopyStatus]:
        return list(self.copies.values())

    def logs(self, copy_id: str, lines: int = 200) -> str:
        return f"log of {copy_id}\n"

    def log_file(self, copy_id: str) -> str | None:
        return None

    async def logs_elsewhere(self, copy_id: str, lines: int, log_file: str | None) -> str:
        raise KeyError(f"Copy {copy_id}'s log is on the leader's host.")

    async def path_on(self, copy_id: str, path: str) -> str:
        return path

    async def close(self) -> None:
        self.closed = True
        self.copies.clear()

    def set_state(self, copy_id: str, state: CopyState, message: str = "") -> None:
        self.copies[copy_id] = dataclasses.replace(self.copies[copy_id], state=state, message=message)

    def ready_all(self) -> None:
        for copy_id in self.copies:
            self.set_state(copy_id, CopyState.READY)


class ServingBackend(FakeBackend):
    """The fake backend, its copies answering at a real server's address (`url`): every copy the same server."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url

    async def start(self, spec: CopySpec) -> None:
        await super().start(spec)
        self.copies[spec.copy_id] = dataclasses.replace(self.copies[spec.copy_id], url=self.url)
