"""The embedding path: pure packing and normalization, and real embedding GGUFs (each pooling type) compared
with llama-cpp-python's own `Llama(embedding=True).embed()`."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from pier.engine.embedder import Embedder, normalized, pack
from pier.errors import InvalidRequest

TEXTS = ["the cat sat on the mat", "a dog", "hello world and more words here", "the cat"]


@pytest.mark.parametrize(("lengths", "n_batch", "n_seq_max", "expected"), [
    ([], 8, 4, []),
    ([3, 3, 2], 8, 4, [[0, 1, 2]]),
    ([3, 3, 3], 8, 4, [[0, 1], [2]]),  # tokens
    ([1, 1, 1, 1, 1], 8, 2, [[0, 1], [2, 3], [4]]),  # sequences
    ([8, 1, 8], 8, 4, [[0], [1], [2]]),  # a full batch alone
])
def test_pack(lengths: list[int], n_batch: int, n_seq_max: int, expected: list[list[int]]) -> None:
    assert pack(lengths, n_batch, n_seq_max) == expected


@pytest.mark.parametrize(("vector", "expected"), [([3.0, 4.0], [0.6, 0.8]), ([0.0, 0.0], [0.0, 0.0])])
def test_normalized(vector: list[float], expected: list[float]) -> None:
    assert np.allclose(normalized(np.array(vector, np.float32)), expected)


@pytest.fixture(scope="module", params=["mean", "cls", "last"])
def embedder(request: pytest.FixtureRequest, embedding_ggufs: dict[str, Path]) -> Iterator[Embedder]:
    started = Embedder(embedding_ggufs[request.param], n_ctx=256, n_seq_max=4, flash_attn=False)
    try:
        yield started
    finally:
        started.stop()


def test_vectors_are_llama_cpps_own(embedder: Embedder, embedding_ggufs: dict[str, Path]) -> None:
    import llama_cpp

    reference = llama_cpp.Llama(str(embedding_ggufs[embedder.pooling]), embedding=True, n_ctx=256, verbose=False,
                                flash_attn=False)
    expected = reference.embed(TEXTS)
    got = embedder.embed([embedder.tokenize(t) for t in TEXTS]).result()  # 4 inputs, one batch
    assert [len(v) for v in got] == [embedder.n_embd] * len(TEXTS)
    for mine, theirs in zip(got, expected, strict=True):
        assert np.array_equal(mine, np.array(theirs, np.float32))


def test_pooling_decides_what_differs(embedder: Embedder) -> None:
    a, b = embedder.embed([embedder.tokenize("the cat sat"), embedder.tokenize("the cat")]).result()
    assert not np.allclose(a, b)


def test_concurrent_requests_get_their_own_vectors(embedder: Embedder) -> None:
    tokens = [embedder.tokenize(t) for t in TEXTS]
    alone = [embedder.embed([t]).result()[0] for t in tokens]
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda i: embedder.embed([tokens[i % 4]] * 3).result(), range(16)))
    for i, vectors in enumerate(together):
        for vector in vectors:
            assert np.allclose(vector, alone[i % 4], atol=1e-5)  # batching changes rounding only


@pytest.mark.parametrize(("inputs", "message"), [
    ([[]], "Input 0 is empty"),
    ([[1, 2], [1] * 300], "Input 1 has 300 tokens, more than the 256"),
    ([[1, 10**6]], "outside the model's vocabulary"),
])
def test_bad_inputs_are_refused_before_any_work(embedder: Embedder, inputs: list[list[int]], message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        embedder.check(inputs)


def test_a_generation_model_is_not_an_embedding_model(tiny_gguf: Path) -> None:
    with pytest.raises(ValueError, match="not an embedding model"):
        Embedder(tiny_gguf, n_ctx=128)


def test_a_stopped_embedder_refuses_at_once(embedding_ggufs: dict[str, Path]) -> None:
    from pier.errors import EngineStopped

    stopped = Embedder(embedding_ggufs["mean"], n_ctx=128)
    tokens = stopped.tokenize("the cat")
    pending = [stopped.embed([tokens]) for _ in range(8)]
    stopped.stop()
    for future in pending:  # each one answered or failed, never left waiting
        assert future.exception(timeout=5) is None or isinstance(future.exception(), EngineStopped)
    with pytest.raises(EngineStopped):
        stopped.embed([tokens]).result(timeout=5)
