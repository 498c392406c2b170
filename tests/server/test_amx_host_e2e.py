"""On a host with AMX (Intel Xeon, Sapphire Rapids and later) and a llama.cpp build with it, as `pip install` makes
it there: a copy of a Q4_0 and of a Q8_0 model (the types AMX's kernels take) loads with the default build and
answers, whichever family its probe keeps, and says which on /ping. Elsewhere this test skips, saying why."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from pier.channel.headers import KERNELS_HEADER
from pier.engine.kernels import read_host
from pier.engine.llama import system_info
from tests.server.processes import ContainerProcess

HOST = read_host(system_info())

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not HOST.amx, reason=(
        "needs AMX: this host's CPU lacks amx_int8 or this llama.cpp build has no AMX kernels "
        f"({HOST.summary()})")),
]


@pytest.mark.parametrize("model", ["tiny_gguf", "small_gguf"])  # Q8_0, Q4_0
def test_a_quantized_model_decodes_on_an_amx_host(model: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    gguf: Path = request.getfixturevalue(model)
    with ContainerProcess(gguf, tmp_path / "log", PIER_CACHE_DIR=str(tmp_path / "cache")) as server:
        server.wait_ready(180)
        for _ in range(3):
            answer = httpx.post(server.url + "/generate", json={"inputs": "the cat sat on the mat and",
                                                                "parameters": {"max_new_tokens": 16}}, timeout=60)
            assert answer.status_code == 200, answer.text
        said = httpx.get(server.url + "/ping").headers[KERNELS_HEADER]
    assert said.endswith("kernels") or "using" in said
    assert server.process.returncode == 0, server.output()
