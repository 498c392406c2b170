"""Shared fixtures: real GGUF files built once per test session (random weights, no download)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pier.synthetic.builder import TINY, build_gguf

    return build_gguf(tmp_path_factory.mktemp("models") / "tiny-q8_0.gguf", TINY, quant="Q8_0")


@pytest.fixture(scope="session")
def small_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pier.synthetic.builder import SMALL, build_gguf

    return build_gguf(tmp_path_factory.mktemp("models") / "small-q4_0.gguf", SMALL, quant="Q4_0")


@pytest.fixture(scope="session")
def small_f32_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pier.synthetic.builder import SMALL, build_gguf

    return build_gguf(tmp_path_factory.mktemp("models") / "small-f32.gguf", SMALL, quant="F32")


@pytest.fixture(scope="session")
def embedding_ggufs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """TINY embedding models, one per pooling type llama.cpp has for them."""
    from pier.synthetic.builder import POOLINGS, TINY, build_gguf

    folder = tmp_path_factory.mktemp("embedding-models")
    return {pooling: build_gguf(folder / f"embed-{pooling}.gguf", TINY, quant="Q8_0", name=f"embed-{pooling}",
                                pooling=pooling) for pooling in POOLINGS}
