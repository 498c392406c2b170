"""The gateway's own OpenAI answers, with the openai client, over a backend that runs nothing: GET /v1/models/{model}
(`client.models.retrieve`) and the errors of the router itself (a path or method it does not serve), which the
client reads only in OpenAI's shape."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from pier.gateway.app import create_gateway
from tests.control.fakes import FakeBackend
from tests.gateway.served import classic_endpoint
from tests.sockets import serving


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("gateway")
    (folder / "model").mkdir()
    (folder / "model" / "m.gguf").write_bytes(b"GGUF")
    with serving(create_gateway(folder / "state", backend=FakeBackend(), tick_s=0.05), lifespan="on") as served:
        classic_endpoint(served, folder / "model", "chat")
        yield served


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=10)


def error_of(raised: pytest.ExceptionInfo[openai.APIStatusError]) -> dict[str, Any]:
    body = raised.value.body
    assert isinstance(body, dict) and set(body) == {"message", "type", "param", "code"}, body
    return body


def test_a_listed_model_is_retrieved_as_listed(url: str) -> None:
    listed = client(url).models.list().data
    assert [m.id for m in listed] == ["chat"]
    assert client(url).models.retrieve("chat") == listed[0]
    assert httpx.get(url + "/v1/models/").json() == httpx.get(url + "/v1/models").json()  # as when it was redirected


def test_an_unknown_model_is_not_found_in_openais_words(url: str) -> None:
    with pytest.raises(openai.NotFoundError) as raised:
        client(url).models.retrieve("nope")
    error = error_of(raised)
    assert (error["type"], error["code"]) == ("invalid_request_error", "model_not_found")
    assert "`nope` does not exist" in error["message"] and "GET /v1/models" in error["message"]


def test_a_path_the_gateway_does_not_serve_is_an_openai_404(url: str) -> None:
    with pytest.raises(openai.NotFoundError) as raised:
        client(url).images.generate(model="chat", prompt="hi")
    error = error_of(raised)
    assert error["type"] == "invalid_request_error"
    assert "POST /v1/images/generations" in error["message"] and "/v1/chat/completions" in error["message"]


def test_a_method_the_route_does_not_take_is_an_openai_405(url: str) -> None:
    answer = httpx.get(url + "/v1/chat/completions")
    assert answer.status_code == 405 and answer.headers["allow"] == "POST"
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error" and "GET" in error["message"]
    under_endpoint = httpx.delete(url + "/endpoints/chat/v1/completions")
    assert under_endpoint.status_code == 405 and "error" in under_endpoint.json()
