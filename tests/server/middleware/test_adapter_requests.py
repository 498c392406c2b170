"""The model server's side of LoRA adapters: a request whose gateway names an adapter loads it once and runs
under it; a server without a copy secret, or a model that takes no adapters, refuses in the route's shape."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from pier.channel.copy_secret import COPY_SECRET_ENV
from pier.engine.engine import Engine
from pier.engine.engine_config import EngineConfig
from pier.engine.llama import LlamaRunner
from pier.server.app import create_app
from pier.server.settings import ServerSettings
from pier.synthetic.builder import TINY
from pier.synthetic.lora import build_lora_gguf
from tests.server.conftest import app_client

pytestmark = pytest.mark.anyio
GENERATE = {"inputs": "the quick brown fox", "parameters": {"max_new_tokens": 6}}


def named(adapter: Path, name: str = "ad") -> dict[str, str]:
    return {"X-Pier-Adapter": name, "X-Pier-Adapter-File": str(adapter), "X-Pier-Adapter-Scale": "1.0"}


@pytest.fixture(scope="module")
def adapter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_lora_gguf(tmp_path_factory.mktemp("lora") / "adapter.gguf", TINY, seed=3)


async def test_a_server_without_a_copy_secret_refuses_adapters(client: httpx.AsyncClient, adapter: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # Whether a gateway started the copy is read once, at start (ServerSettings.from_gateway): an environment
    # changed later is not read while a request is answered.
    monkeypatch.setenv(COPY_SECRET_ENV, "s")
    answer = await client.post("/generate", json=GENERATE, headers=named(adapter))
    assert answer.status_code == 422 and "from its gateway only" in answer.json()["error"]  # TGI's shape


async def test_a_model_without_adapters_refuses_them(adapter: Path) -> None:
    async with app_client(settings=ServerSettings(model_name="fake-model", from_gateway=True)) as client:
        answer = await client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2},
                                   headers=named(adapter))
    assert answer.status_code == 400 and "does not take LoRA adapters" in answer.json()["error"]["message"]


async def test_an_adapter_is_loaded_once_and_changes_the_answer(tiny_gguf: Path, adapter: Path) -> None:
    engine = Engine(LlamaRunner(tiny_gguf, n_ctx=512, n_seq_max=8, n_threads=2),
                    EngineConfig(max_running=4, step_tokens=64)).start()
    try:
        app = create_app(ServerSettings(model_name="tiny", from_gateway=True), engine=engine)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://pier") as client:
            base = (await client.post("/generate", json=GENERATE)).json()["generated_text"]
            adapted = [(await client.post("/generate", json=GENERATE, headers=named(adapter))).json()[
                "generated_text"] for _ in range(2)]
            assert adapted[0] == adapted[1] != base
            listed = (await client.get("/pier/adapters")).json()["adapters"]
            assert [(a["name"], a["path"], a["bytes"] > 0) for a in listed] == [("ad", str(adapter), True)]
            missing = await client.post("/generate", json=GENERATE, headers=named(adapter.with_name("no.gguf"), "b"))
            assert missing.status_code == 422 and "No file at" in missing.json()["error"]
            # NaN or huge weights answered empty text under a 200: refused at load, saying why
            for poison in (float("nan"), 1e30):
                hostile = build_lora_gguf(adapter.with_name(f"{poison}.gguf"), TINY, poison=poison)
                refused = await client.post("/generate", json=GENERATE, headers=named(hostile, f"p{poison}"))
                assert refused.status_code == 422 and "holds" in refused.json()["error"], refused.text
    finally:
        engine.stop()
        engine.runner.close()


async def test_an_adapter_given_another_file_answers_as_that_file(tiny_gguf: Path, adapter: Path,
                                                                  tmp_path: Path) -> None:
    """UpdateInferenceComponent gives an adapter a new artifact under the same name: the copy answered the new
    file's requests with the KV its prefix cache had computed under the old file (and swapped the adapter's
    llama.cpp handle under the engine's feet)."""
    other = build_lora_gguf(tmp_path / "other.gguf", TINY, seed=4)
    engine = Engine(LlamaRunner(tiny_gguf, n_ctx=512, n_seq_max=8, n_threads=2),
                    EngineConfig(max_running=4, step_tokens=64)).start()
    greedy = {"inputs": GENERATE["inputs"], "parameters": {"max_new_tokens": 6, "do_sample": False}}
    try:
        app = create_app(ServerSettings(model_name="tiny", from_gateway=True), engine=engine)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://pier") as client:
            async def answer(path: Path, name: str) -> str:
                reply = await client.post("/generate", json=greedy, headers=named(path, name))
                return str(reply.json()["generated_text"])

            first = await answer(adapter, "ad")
            updated = await answer(other, "ad")
            assert updated == await answer(other, "fresh") != first
            assert {a["name"] for a in (await client.get("/pier/adapters")).json()["adapters"]} == {"ad", "fresh"}
    finally:
        engine.stop()
        engine.runner.close()


async def test_an_adapter_whose_file_is_deleted_serves_what_was_loaded(tiny_gguf: Path, tmp_path: Path) -> None:
    """A file:// adapter whose file is deleted failed every later call (424 at the client) while Describe said
    InService: the copy serves what it loaded, as it serves a model whose file is gone; a name it never loaded
    is still refused saying there is no file."""
    adapter = build_lora_gguf(tmp_path / "adapter.gguf", TINY, seed=5)
    engine = Engine(LlamaRunner(tiny_gguf, n_ctx=512, n_seq_max=8, n_threads=2),
                    EngineConfig(max_running=4, step_tokens=64)).start()
    greedy = {"inputs": GENERATE["inputs"], "parameters": {"max_new_tokens": 6, "do_sample": False}}
    try:
        app = create_app(ServerSettings(model_name="tiny", from_gateway=True), engine=engine)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://pier") as client:
            before = await client.post("/generate", json=greedy, headers=named(adapter))
            adapter.unlink()
            after = await client.post("/generate", json=greedy, headers=named(adapter))
            assert after.status_code == 200 and after.json() == before.json()
            other = await client.post("/generate", json=greedy, headers=named(adapter, "never-loaded"))
            assert other.status_code == 422 and "No file at" in other.json()["error"]
    finally:
        engine.stop()
        engine.runner.close()
