"""The engine as the servers use it: one thread owns the llama.cpp context and runs `EngineCore.step()`;
callers submit requests from any thread and read their output through a per-request mailbox."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from dataclasses import dataclass

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.request import FinishReason, GenerateRequest, GenerationChunk
from pier.engine.runner import ModelInfo, ModelRunner
from pier.engine.sequence import Emit, Sequence
from pier.engine.stats import EngineStats
from pier.engine.validate import CheckedRequest, checked
from pier.errors import EngineStopped

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Submit:
    seq: Sequence


@dataclass(frozen=True)
class _Abort:
    request_id: str


@dataclass(frozen=True)
class _Stop:
    pass


_Command = _Submit | _Abort | _Stop


class RequestStream:
    """The chunks of one submitted request, read on the event loop; the last one has a finish reason."""

    def __init__(self, engine: Engine, request_id: str, mailbox: asyncio.Queue[GenerationChunk]) -> None:
        self._engine, self.request_id, self._mailbox = engine, request_id, mailbox
        self._done = False

    def __aiter__(self) -> RequestStream:
        return self

    async def __anext__(self) -> GenerationChunk:
        if self._done:
            raise StopAsyncIteration
        chunk = await self._mailbox.get()
        self._done = chunk.finished
        return chunk

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        if not self._done:
            self._done = True
            self._engine.abort(self.request_id)

    def __del__(self) -> None:
        self.close()


class Engine:
    def __init__(self, runner: ModelRunner, config: EngineConfig | None = None) -> None:
        self.core = EngineCore(runner, config)
        self.runner = runner
        self._inbox: queue.SimpleQueue[_Command] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="pier-engine", daemon=True)
        self._accepting = True
        self._stats = self.core.stats()
        self._outbox: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Queue[GenerationChunk], GenerationChunk]]] = {}

    @property
    def info(self) -> ModelInfo:
        return self.runner.info

    def start(self) -> Engine:
        self._thread.start()
        # What grammars need of the vocabulary (a pass over every token: seconds on a 262k vocabulary under load)
        # is read now, beside the engine, so the first grammar request does not stall every stream in flight.
        threading.Thread(target=self.core.utf8_guard, name="pier-utf8-guard", daemon=True).start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop accepting work, end what is in flight, join the thread. The runner's owner closes it."""
        self._accepting = False
        self._inbox.put(_Stop())
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stats(self) -> EngineStats:
        """A snapshot taken after the last step; safe to read from any thread."""
        return self._stats

    # -- submitting ------------------------------------------------------------------------------

    def check(self, request: GenerateRequest) -> CheckedRequest:
        """Validate and tokenize now (any thread), raising InvalidRequest before any work; submit the result."""
        return checked(request, self.core.runner)

    def submit(self, request: GenerateRequest | CheckedRequest, emit: Emit) -> None:
        """Validate (raising before any work) and queue the request. `emit` is called on the engine
        thread with each chunk; the last chunk has a finish reason."""
        if not self._accepting or not self._thread.is_alive():
            raise EngineStopped("The engine is shutting down and accepts no new requests; retry on another copy.")
        self._inbox.put(_Submit(self.core.prepare(request, emit)))

    def abort(self, request_id: str) -> None:
        self._inbox.put(_Abort(request_id))

    def generate(self, request: GenerateRequest | CheckedRequest) -> RequestStream:
        """Validate and submit now (raising InvalidRequest before any work, so a server can still answer
        with a status code), then stream the chunks on the caller's event loop. Closing the stream early,
        or dropping it, aborts the request and frees its KV."""
        loop = asyncio.get_running_loop()
        mailbox: asyncio.Queue[GenerationChunk] = asyncio.Queue()

        def emit(chunk: GenerationChunk) -> None:  # on the engine thread: delivered after the step
            self._outbox.setdefault(loop, []).append((mailbox, chunk))

        ok = checked(request, self.core.runner)
        self.submit(ok, emit)
        return RequestStream(self, ok.request.request_id, mailbox)

    def _deliver(self) -> None:
        """Hand the chunks of the step just done to their event loops, one wake-up per loop. Sent after the
        step, the serving work (SSE, sockets) runs while the next forward pass computes with the GIL released,
        instead of taking the GIL from the engine thread between its Python calls inside the step."""
        outbox, self._outbox = self._outbox, {}
        for loop, items in outbox.items():
            try:
                loop.call_soon_threadsafe(_put_all, items)
            except RuntimeError:  # the caller's loop is closed: nobody is listening any more
                for _, chunk in items:
                    self.abort(chunk.request_id)

    # -- the engine thread -----------------------------------------------------------------------

    def _run(self) -> None:
        core = self.core
        while True:
            if not self._drain(block=not core.has_work):
                break
            try:
                core.step()
            except Exception as error:  # a failed forward pass must not take the process down
                log.exception("engine step failed")
                core.fail_all(f"The model failed during generation: {error}")
            self._deliver()
            self._stats = core.stats()
        core.fail_all("The engine stopped before this request finished; retry it.")
        self._deliver()

    def _drain(self, block: bool) -> bool:
        """Apply queued commands; False once told to stop."""
        try:
            command = self._inbox.get(timeout=0.5) if block else self._inbox.get_nowait()
        except queue.Empty:
            return True
        while True:
            if isinstance(command, _Stop):
                return False
            self._apply(command)
            try:
                command = self._inbox.get_nowait()
            except queue.Empty:
                return True

    def _apply(self, command: _Submit | _Abort) -> None:
        if isinstance(command, _Submit):
            try:
                self.core.add(command.seq)
            except Exception as error:
                command.seq.emit(GenerationChunk(
                    command.seq.request_id, "", (), finish_reason=FinishReason.ERROR, error=str(error)))
        else:
            self.core.abort(command.request_id)


def _put_all(items: list[tuple[asyncio.Queue[GenerationChunk], GenerationChunk]]) -> None:
    for mailbox, chunk in items:
        mailbox.put_nowait(chunk)
