"""What one model server knows about itself: loading, ready, draining or failed, and what it serves:
a model on pier's engine, or the user's own inference.py (bring-your-own-code mode)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Protocol

from fastapi import Depends, Request

from pier.engine.stats import EngineStats
from pier.errors import InvalidRequest, NotReady
from pier.server.copy_admission import CopyAdmission, Ticket
from pier.server.errors import ShuttingDown
from pier.server.served_embedder import ServedEmbedder
from pier.server.served_model import ServedModel
from pier.server.server_metrics import ServerMetrics
from pier.server.settings import ServerSettings


class Status(StrEnum):
    LOADING = "loading"
    READY = "ready"
    DRAINING = "draining"
    FAILED = "failed"


class InvocationHandler(Protocol):
    """What the server needs of pier.server.byoc.pool.HandlerService (imported only when a model has code)."""

    @property
    def ready(self) -> bool: ...

    async def invoke(
        self, body: bytes, content_type: str, accept: str, custom_attributes: str | None = None
    ) -> tuple[bytes, str]: ...


class ServerState:
    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self.admission = CopyAdmission(settings.max_concurrent_requests, settings.parallel)
        self.metrics = ServerMetrics(self._engine_stats, lambda: self.admission.in_flight)
        self.model: ServedModel | None = None
        self.embedder: ServedEmbedder | None = None  # an embedding model is served instead of `model`
        self.handler: InvocationHandler | None = None
        self.draining = False
        self.failure: str | None = None
        self.exit_code: int | None = None  # with a failure: what the process exits with (1 unless said)

    @property
    def concurrency(self) -> int:
        """Requests this copy works on at once: its engine's parallel sequences, or its handler's workers, never
        more than MAX_CONCURRENT_REQUESTS. The gateway sends it no more (`pier.channel.concurrency`)."""
        if self.handler is not None:
            return min(self.settings.max_concurrent_requests, self.settings.workers)
        return self.admission.most_sequences  # what one request's choices may take, the same bound

    @property
    def status(self) -> Status:
        if self.draining:
            return Status.DRAINING
        if self.failure is not None:
            return Status.FAILED
        if self.handler is not None:
            return Status.READY if self.handler.ready else Status.LOADING
        if self.embedder is not None:
            return Status.READY if self.embedder.alive else Status.FAILED
        if self.model is None:
            return Status.LOADING
        return Status.READY if self.model.engine.alive else Status.FAILED

    def loaded(self) -> ServedModel:
        """The model, for questions about it (no generation); raises 503 errors while there is none."""
        self._check_open()
        if self.embedder is not None:
            raise self.embedder.generation_refused()
        if self.model is None or not self.model.engine.alive:
            raise NotReady(self.not_ready_message())
        return self.model

    def listed(self) -> tuple[str, int, int | None]:
        """What /v1/models says of the model served: its name, when it loaded, its longest input (or context)."""
        self._check_open()
        if self.embedder is not None:
            return self.embedder.name, self.embedder.created, self.embedder.embedder.n_batch
        model = self.loaded()
        return model.name, model.created, model.limits.max_total_tokens

    def admit_embedding(self) -> tuple[ServedEmbedder, Ticket]:
        """The embedding model and a concurrency ticket; a generation model's answer is a clear 400."""
        self._check_open()
        if self.embedder is None:
            if self.model is not None:
                raise InvalidRequest(
                    f"Model {self.model.name} is a generation model, not an embedding model (its GGUF sets no pooling "
                    "type): it gives no embeddings. Deploy an embedding GGUF (mean, cls or last pooling) for them.")
            raise NotReady(self.not_ready_message())
        if not self.embedder.alive:
            raise NotReady("The embedder has stopped; restart this model server.")
        return self.embedder, self.admission.enter()

    def admit(self, turns: int = 1) -> tuple[ServedModel, Ticket]:
        """The model and a concurrency ticket for one generation of `turns` sequences (n choices); raises 503 or
        429 errors otherwise."""
        model = self.loaded()
        return model, self.admission.enter(turns)

    def admit_invocation(self) -> tuple[InvocationHandler, Ticket]:
        """The user's handler and a concurrency ticket for one invocation (bring-your-own-code mode)."""
        self._check_open()
        if self.handler is None or not self.handler.ready:
            raise NotReady(self.not_ready_message())
        return self.handler, self.admission.enter()

    def _check_open(self) -> None:
        if self.draining:
            raise ShuttingDown(
                "This model server is shutting down and takes no new requests; retry, and the request "
                "goes to another copy."
            )

    def not_ready_message(self) -> str:
        if self.failure is not None:
            return f"The model failed to load: {self.failure}"
        if self.draining:
            return "This model server is shutting down; send requests to another copy."
        if self.model is not None and not self.model.engine.alive:
            return "The engine has stopped; restart this model server."
        if self.handler is not None:
            return (
                "The model's inference.py is still starting (requirements, model_fn); retry when GET /ping "
                "answers 200."
            )
        return "The model is still loading; retry when GET /ping answers 200."

    def _engine_stats(self) -> EngineStats | None:
        return self.model.engine.stats() if self.model is not None else None


def server_state(request: Request) -> ServerState:
    """FastAPI dependency: the app's state."""
    state: ServerState = request.app.state.pier
    return state


State = Annotated[ServerState, Depends(server_state)]
