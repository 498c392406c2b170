"""The loaded embedding model as the routes use it: its name, its embedder, and how text becomes its inputs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import numpy as np

from pier.engine.embedder import Embedder, normalized
from pier.errors import InvalidRequest

INLINE_TOKENIZE_CHARS = 4096  # longer texts are tokenized off the event loop


class ServedEmbedder:
    def __init__(self, embedder: Embedder, name: str) -> None:
        self.embedder = embedder
        self.name = name
        self.created = int(time.time())

    @property
    def alive(self) -> bool:
        return self.embedder.alive

    def generation_refused(self) -> InvalidRequest:
        """What a request to generate text with this model gets."""
        return InvalidRequest(
            f"Model {self.name} is an embedding model ({self.embedder.pooling} pooling): it does not generate text. "
            "Ask it for embeddings (POST /v1/embeddings, or /invocations with {\"inputs\": [\"...\"]}), or deploy a "
            "generation model to generate.")

    async def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        if sum(len(t) for t in texts) <= INLINE_TOKENIZE_CHARS:
            return [self.embedder.tokenize(t) for t in texts]
        return await asyncio.to_thread(lambda: [self.embedder.tokenize(t) for t in texts])

    async def embed(self, inputs: Sequence[Sequence[int]], *, normalize: bool = True) -> list[np.ndarray]:
        """Checked first (a bad input fails the request before any work), then batched with every other request's."""
        self.embedder.check(inputs)
        vectors = await self.embedder.aembed(inputs)
        return [normalized(v) for v in vectors] if normalize else vectors
