"""Embeddings: an embedding GGUF (one whose `<arch>.pooling_type` is mean, cls or last) in llama.cpp's embeddings
mode, many inputs per `llama_decode`.

A separate path from generation: no sampling, no KV reuse. One thread owns the context; `embed()` from any thread
(or `aembed()` from an event loop) queues inputs, and the thread packs whatever is waiting, from every request,
into batches of at most `n_batch` tokens and `n_seq_max` sequences (one sequence id per input, each input whole in
one batch since non-causal attention needs all of it at once), decodes, reads each sequence's pooled vector with
`llama_get_embeddings_seq`, and clears the memory for the next batch.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import queue
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import llama_cpp
import numpy as np

from pier.engine.cpus import engine_threads, usable_cores
from pier.engine.llama import load_model, set_flash_attn, tokenize
from pier.engine.offload import ON_CPU, Offload
from pier.errors import EngineStopped, InvalidRequest

log = logging.getLogger(__name__)

POOLING_NAMES = {llama_cpp.LLAMA_POOLING_TYPE_MEAN: "mean", llama_cpp.LLAMA_POOLING_TYPE_CLS: "cls",
                 llama_cpp.LLAMA_POOLING_TYPE_LAST: "last"}


@dataclass(eq=False)
class _Job:
    inputs: Sequence[Sequence[int]]
    future: Future[list[np.ndarray]]
    vectors: dict[int, np.ndarray] = field(default_factory=dict)


def pack(lengths: Sequence[int], n_batch: int, n_seq_max: int) -> list[list[int]]:
    """Indices of inputs grouped into batches, in order: each batch at most `n_batch` tokens and `n_seq_max`
    inputs. Every length must be at most `n_batch`."""
    batches: list[list[int]] = []
    tokens = 0
    for index, length in enumerate(lengths):
        if not batches or tokens + length > n_batch or len(batches[-1]) >= n_seq_max:
            batches.append([])
            tokens = 0
        batches[-1].append(index)
        tokens += length
    return batches


def normalized(vector: np.ndarray) -> np.ndarray:
    """Scaled to unit length (Euclidean), as OpenAI's and TEI's embeddings are; a zero vector stays zero."""
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


class Embedder:
    def __init__(self, model_path: str | Path, *, n_ctx: int = 2048, n_seq_max: int = 16,
                 n_threads: int | None = None, flash_attn: bool | None = None, offload: Offload = ON_CPU) -> None:
        path = Path(model_path)
        self._model = load_model(path, offload)
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        n_ctx = min(n_ctx, llama_cpp.llama_model_n_ctx_train(self._model))
        self._ctx = self._new_context(n_ctx, n_seq_max, n_threads or engine_threads(usable_cores()), flash_attn)
        self.pooling = POOLING_NAMES.get(llama_cpp.llama_pooling_type(self._ctx), "none")
        if self.pooling == "none":
            self._free()
            raise ValueError(f"{path} is not an embedding model: its GGUF sets no pooling type (mean, cls or last).")
        self._memory = llama_cpp.llama_get_memory(self._ctx)
        self.n_batch = llama_cpp.llama_n_batch(self._ctx)
        self.n_seq_max = llama_cpp.llama_n_seq_max(self._ctx)
        self.n_embd = llama_cpp.llama_model_n_embd(self._model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self._vocab)
        self._batch = llama_cpp.llama_batch_init(self.n_batch, 0, self.n_seq_max)
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="pier-embedder", daemon=True)
        self.alive = True
        self._thread.start()

    def _new_context(self, n_ctx: int, n_seq_max: int, n_threads: int, flash_attn: bool | None
                     ) -> llama_cpp.llama_context_p:
        params = llama_cpp.llama_context_default_params()
        set_flash_attn(params, flash_attn)  # off gives llama-cpp-python's numbers
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = n_ctx  # an input is encoded whole: non-causal attention needs all of it
        params.n_seq_max = n_seq_max
        params.n_threads = params.n_threads_batch = n_threads
        params.embeddings = True
        params.kv_unified = True
        params.no_perf = True
        ctx = llama_cpp.llama_init_from_model(self._model, params)
        if not ctx:
            raise MemoryError(f"llama.cpp could not create an embedding context of {n_ctx} tokens.")
        return ctx

    # -- from any thread -----------------------------------------------------------------------------

    def tokenize(self, text: str) -> list[int]:
        """As llama.cpp's embedding tools do: the vocabulary's special tokens (BOS, or BERT's CLS and SEP)."""
        return tokenize(self._vocab, text, add_special=True, parse_special=False)

    def check(self, inputs: Sequence[Sequence[int]]) -> None:
        """Refuse, before any work, what cannot be embedded: an empty input, one longer than a batch."""
        for index, tokens in enumerate(inputs):
            if not tokens:
                raise InvalidRequest(f"Input {index} is empty: send text or token ids to embed.", param="input")
            if len(tokens) > self.n_batch:
                raise InvalidRequest(
                    f"Input {index} has {len(tokens)} tokens, more than the {self.n_batch} this model embeds at once: "
                    "shorten it, or split it into several inputs.", param="input")
            if any(not 0 <= t < self.n_vocab for t in tokens):
                raise InvalidRequest(f"Input {index} has token ids outside the model's vocabulary.", param="input")

    def embed(self, inputs: Sequence[Sequence[int]]) -> Future[list[np.ndarray]]:
        """The pooled vector of each input (token ids, checked), in order, unnormalized."""
        future: Future[list[np.ndarray]] = Future()
        if not self.alive:
            future.set_exception(EngineStopped("The embedder has stopped; restart this model server."))
            return future
        self._jobs.put(_Job(inputs, future))
        return future

    async def aembed(self, inputs: Sequence[Sequence[int]]) -> list[np.ndarray]:
        return await asyncio.wrap_future(self.embed(inputs))

    def stop(self) -> None:
        """Finish the batch being decoded, fail what still waits, free llama.cpp's memory."""
        if self.alive:
            self.alive = False
            self._jobs.put(None)
            self._thread.join(timeout=30)
            while not self._jobs.empty():
                job = self._jobs.get()
                if job is not None and not job.future.done():
                    job.future.set_exception(EngineStopped("The embedder stopped before this request's turn."))
            llama_cpp.llama_batch_free(self._batch)
            self._free()

    def _free(self) -> None:
        llama_cpp.llama_free(self._ctx)
        llama_cpp.llama_model_free(self._model)

    # -- the embedder's thread -----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            jobs = [job]
            while not self._jobs.empty():  # everything waiting goes into the same batches
                more = self._jobs.get()
                if more is None:
                    self._jobs.put(None)
                    break
                jobs.append(more)
            try:
                self._embed_all(jobs)
            except Exception as error:  # a failed decode fails its requests, not the thread
                log.exception("embedding failed")
                for failed in jobs:
                    if not failed.future.done():
                        failed.future.set_exception(error)

    def _embed_all(self, jobs: list[_Job]) -> None:
        inputs = [(job, index) for job in jobs for index in range(len(job.inputs))]
        lengths = [len(job.inputs[index]) for job, index in inputs]
        for batch in pack(lengths, self.n_batch, self.n_seq_max):
            vectors = self._decode([inputs[i][0].inputs[inputs[i][1]] for i in batch])
            for i, vector in zip(batch, vectors, strict=True):
                job, index = inputs[i]
                job.vectors[index] = vector
        for job in jobs:
            job.future.set_result([job.vectors[i] for i in range(len(job.inputs))])

    def _decode(self, sequences: list[Sequence[int]]) -> list[np.ndarray]:
        batch = self._batch
        n = 0
        for seq_id, tokens in enumerate(sequences):
            for pos, token in enumerate(tokens):
                batch.token[n] = token
                batch.pos[n] = pos
                batch.n_seq_id[n] = 1
                batch.seq_id[n][0] = seq_id
                batch.logits[n] = 1  # every token's output: pooling reads the ones it needs
                n += 1
        batch.n_tokens = n
        try:
            status = llama_cpp.llama_decode(self._ctx, batch)
            if status != 0:
                raise RuntimeError(f"llama_decode returned {status} for an embedding batch of {n} tokens")
            vectors = []
            for seq_id in range(len(sequences)):
                pointer = llama_cpp.llama_get_embeddings_seq(self._ctx, seq_id)
                if not pointer:
                    raise RuntimeError(f"llama.cpp gave no embedding for sequence {seq_id}")
                vectors.append(np.ctypeslib.as_array(ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)),
                                                     shape=(self.n_embd,)).copy())
            return vectors
        finally:
            llama_cpp.llama_memory_clear(self._memory, True)
