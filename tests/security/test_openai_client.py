"""The openai client against a gateway with keys: its api_key is a pier API key; without one (or with a wrong
one) it gets OpenAI's 401, with a key for another endpoint OpenAI's 403."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.security.conftest import Secured, chat

CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}


def client(secured: Secured, api_key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{secured.url}/v1", api_key=api_key, max_retries=0)


def test_the_openai_client_works_with_an_api_key(secured: Secured) -> None:
    secured.deploy("chat")
    reply = chat(client(secured, secured.keys["invoker"].api_key), "chat", max_tokens=3)
    assert reply.usage is not None and reply.usage.completion_tokens == 3
    streamed = client(secured, secured.keys["admin"].api_key).completions.create(
        model="chat", prompt="the cat", max_tokens=3, stream=True)
    assert len([chunk for chunk in streamed if chunk.choices]) >= 1


def test_the_model_list_holds_only_what_the_key_may_call(secured: Secured) -> None:
    secured.deploy("chat")
    secured.deploy("allowed")
    listed = {who: sorted(m.id for m in client(secured, secured.keys[who].api_key).models.list())
              for who in ("admin", "invoker", "limited")}
    assert listed == {"admin": ["allowed", "chat"], "invoker": ["allowed", "chat"], "limited": ["allowed"]}


def test_a_limited_key_retrieves_only_what_it_may_call(secured: Secured) -> None:
    secured.deploy("chat")
    secured.deploy("allowed")
    limited = client(secured, secured.keys["limited"].api_key)
    assert limited.models.retrieve("allowed").id == "allowed"
    with pytest.raises(openai.NotFoundError) as raised:  # as if it did not exist: the key learns nothing of it
        limited.models.retrieve("chat")
    assert raised.value.code == "model_not_found"
    assert client(secured, secured.keys["invoker"].api_key).models.retrieve("chat").id == "chat"


def test_a_wrong_api_key_is_401(secured: Secured) -> None:
    with pytest.raises(openai.AuthenticationError) as raised:
        chat(client(secured, "pier-not-a-key"), "chat")
    assert raised.value.status_code == 401
    assert raised.value.code == "invalid_api_key"
    assert "pier keys" in raised.value.message


def test_no_api_key_is_401_in_openais_shape(secured: Secured) -> None:
    reply = httpx.post(f"{secured.url}/v1/chat/completions", json={"model": "chat", **CHAT})
    assert reply.status_code == 401
    assert reply.headers["www-authenticate"].startswith("Bearer")
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] is None and error["param"] is None
    assert "Authorization: Bearer" in error["message"]


def test_a_limited_key_is_403_for_another_endpoint(secured: Secured) -> None:
    secured.deploy("other")
    with pytest.raises(openai.PermissionDeniedError) as raised:
        chat(client(secured, secured.keys["limited"].api_key), "other")
    assert raised.value.code == "insufficient_permissions"
    with pytest.raises(openai.PermissionDeniedError):  # an inference component is reached through its endpoint
        chat(client(secured, secured.keys["limited"].api_key), "other/ic")


def test_an_api_key_is_not_an_admin_credential_unless_its_role_is(secured: Secured) -> None:
    headers = {"Authorization": f"Bearer {secured.keys['invoker'].api_key}",
               "X-Amz-Target": "SageMaker.ListModels", "Content-Type": "application/x-amz-json-1.1"}
    reply = httpx.post(secured.url, content=b"{}", headers=headers)
    assert (reply.status_code, reply.json()["__type"]) == (400, "AccessDeniedException")
    headers["Authorization"] = f"Bearer {secured.keys['admin'].api_key}"
    assert httpx.post(secured.url, content=b"{}", headers=headers).json() == {"Models": []}
