"""SageMaker's OpenAI-compatible paths (/endpoints/E[/inference-components/IC]/openai/v1/...) with the openai
client, on two copies of pier's model server (fake engine), under each routing strategy."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from pier.runtime.routing_strategy import Routing, Strategy
from pier.runtime.target import Target
from tests.runtime.servers import CopyServer, Gateway, copy_server, gateway
from tests.server.processes import metric

SYSTEM = "You are a careful assistant. " * 40  # 1,160 characters: more than the 1,024 of the prefix


@pytest.fixture(scope="module")
def copies() -> Iterator[tuple[CopyServer, CopyServer]]:
    with copy_server() as a, copy_server() as b:
        yield a, b


@pytest.fixture
def gw() -> Iterator[Gateway]:
    with gateway() as started:
        yield started


def route(gw: Gateway, copies: tuple[CopyServer, CopyServer], routing: Routing) -> None:
    gw.targets["llm"] = Target([copies[0].status("a"), copies[1].status("b")], "ic", "AllTraffic", routing)


def chats(copies: tuple[CopyServer, CopyServer]) -> list[float]:
    return [metric(c.url, "pier_http_requests_total", route="/v1/chat/completions", status="200") for c in copies]


def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=30)


def chat(base_url: str, user: str) -> str:
    answer = client(base_url).chat.completions.create(model="anything", max_tokens=3, temperature=0, messages=[
        {"role": "system", "content": SYSTEM}, {"role": "user", "content": user}])
    return answer.choices[0].message.content or ""


@pytest.mark.parametrize(("path", "name"), [("/endpoints/llm/openai/v1", "llm"),
                                            ("/endpoints/llm/inference-components/ic/openai/v1", "ic")])
def test_models_and_completions_on_sagemakers_paths(gw: Gateway, copies: tuple[CopyServer, CopyServer],
                                                    path: str, name: str) -> None:
    route(gw, copies, Routing())
    # the copy's own list, its model named as what the path calls (pier.served_name)
    assert [m.id for m in client(gw.url + path).models.list()] == [name]
    assert client(gw.url + path).models.retrieve(name).id == name
    assert [m["id"] for m in httpx.get(gw.url + path + "/models/").json()["data"]] == [name]
    with pytest.raises(openai.NotFoundError):
        client(gw.url + path).models.retrieve("not-" + name)
    assert client(gw.url + path).completions.create(model="x", prompt="hello", max_tokens=2).model == "x"


@pytest.mark.parametrize("path", ["/endpoints/llm", "/endpoints/llm/openai",
                                  "/endpoints/llm/inference-components/ic/openai"])
def test_llama_servers_tokenizer_under_every_endpoint_path(gw: Gateway, copies: tuple[CopyServer, CopyServer],
                                                           path: str) -> None:
    """Where `pier bench` and `pier tune` look for it: the base of the chat route they measure."""
    route(gw, copies, Routing())
    tokens = httpx.post(gw.url + path + "/tokenize", json={"content": "hello world"}).json()["tokens"]
    assert httpx.post(gw.url + path + "/detokenize", json={"tokens": tokens}).json() == {"content": " hello world"}
    prompt = httpx.post(gw.url + path + "/apply-template", json={"messages": [{"role": "user", "content": "hi"}]})
    assert prompt.json() == {"prompt": "<user>hi<assistant>"}
    bad = httpx.post(gw.url + path + "/tokenize", json={"content": {"not": "text"}})
    assert bad.status_code == 400 and bad.json()["error"]["param"].startswith("content")


def test_prefix_aware_keeps_a_shared_system_prompt_on_one_copy(gw: Gateway,
                                                               copies: tuple[CopyServer, CopyServer]) -> None:
    route(gw, copies, Routing(Strategy.PREFIX_AWARE, 1024, 4))
    before = chats(copies)
    for turn in range(6):
        chat(gw.url + "/endpoints/llm/openai/v1", f"question {turn}")
    served = [after - was for after, was in zip(chats(copies), before, strict=True)]
    assert sorted(served) == [0, 6]  # the first 1,024 characters of the messages' text are the same


def test_least_outstanding_requests_takes_turns(gw: Gateway, copies: tuple[CopyServer, CopyServer]) -> None:
    route(gw, copies, Routing(Strategy.LEAST_OUTSTANDING_REQUESTS))
    before = chats(copies)
    for _ in range(6):
        chat(gw.url + "/endpoints/llm/openai/v1", "the same question")  # pier's default would keep it on one copy
    assert [after - was for after, was in zip(chats(copies), before, strict=True)] == [3, 3]


def test_the_component_header_is_refused_on_the_openai_path(gw: Gateway, copies: tuple[CopyServer, CopyServer]) -> None:
    route(gw, copies, Routing())
    with pytest.raises(openai.BadRequestError, match="name the inference component in the path"):
        client(gw.url + "/endpoints/llm/openai/v1").models.list(
            extra_headers={"X-Amzn-SageMaker-Inference-Component": "ic"})
