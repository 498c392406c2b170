"""A multi-model copy refuses a target it cannot serve with a 400 that says why, whatever is wrong with the file:
a truncated GGUF answered a bare 500 (llama.cpp only logs why it refuses one)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from pier.multi_model import TARGET_MODEL_HEADER
from pier.server.multi_model.app import create_multi_model_app
from pier.server.settings import MultiModelSettings, ServerSettings

pytestmark = pytest.mark.anyio
BODY = {"inputs": "the cat", "parameters": {"max_new_tokens": 2}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def copy(tiny_gguf: Path, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    data = tiny_gguf.read_bytes()
    (tmp_path / "whole.gguf").write_bytes(data)
    (tmp_path / "truncated.gguf").write_bytes(data[: len(data) // 2])
    (tmp_path / "header.gguf").write_bytes(data[:100])
    (tmp_path / "text.gguf").write_bytes(b"not a model")
    app = create_multi_model_app(ServerSettings.from_env({"MAX_TOTAL_TOKENS": "256"}), tmp_path,
                                 MultiModelSettings())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://copy", timeout=60) as client:
            yield client


@pytest.mark.parametrize(("target", "reason"), [
    ("truncated.gguf", "truncated.gguf is truncated: its tensors need"),
    ("header.gguf", "the GGUF header is truncated"),
    ("text.gguf", "not a GGUF file"),
])
async def test_a_bad_file_is_refused_with_its_reason(copy: httpx.AsyncClient, target: str, reason: str) -> None:
    answer = await copy.post("/invocations", json=BODY, headers={TARGET_MODEL_HEADER: target})
    assert answer.status_code == 400, answer.text
    assert reason in answer.json()["message"] and f"Model {target} cannot be served" in answer.json()["message"]
    served = await copy.post("/invocations", json=BODY, headers={TARGET_MODEL_HEADER: "whole.gguf"})
    assert served.status_code == 200 and served.json()[0]["generated_text"]
