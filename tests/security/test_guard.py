"""The guard's edges on a real gateway: open and unnamed routes, oversized signed bodies, a damaged key file."""

from __future__ import annotations

import json

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.security.conftest import GENERATE, Secured, create_keys


def bearer(secured: Secured, who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secured.keys[who].api_key}"}


def test_ping_is_open_and_unnamed_routes_need_admin(secured: Secured) -> None:
    assert httpx.get(secured.url + "/ping").status_code == 200
    for path in ("/docs", "/openapi.json", "/nowhere"):
        refused = httpx.get(secured.url + path, headers=bearer(secured, "invoker"))
        assert (refused.status_code, refused.headers["x-amzn-ErrorType"]) == (403, "AccessDeniedException"), path
        assert httpx.get(secured.url + path).headers["x-amzn-ErrorType"] == "MissingAuthenticationTokenException"
    assert httpx.get(secured.url + "/openapi.json", headers=bearer(secured, "admin")).status_code == 200
    assert httpx.get(secured.url + "/nowhere", headers=bearer(secured, "admin")).status_code == 404


def test_an_api_key_works_on_the_sagemaker_runtime_route(secured: Secured) -> None:
    secured.deploy("bearer")
    reply = httpx.post(secured.url + "/endpoints/bearer/invocations", content=json.dumps(GENERATE),
                       headers={**bearer(secured, "invoker"), "Content-Type": "application/json"}, timeout=30)
    assert reply.status_code == 200 and json.loads(reply.content)[0]["generated_text"]


def test_a_signed_body_past_the_payload_limit_is_refused_unread(secured: Secured) -> None:
    runtime = secured.client("sagemaker-runtime")
    with pytest.raises(ClientError) as raised:
        runtime.invoke_endpoint(EndpointName="e", ContentType="application/json", Body=b"x" * (6 * 2**20 + 1))
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 413


def test_a_damaged_key_file_refuses_everything(secured: Secured, caplog: pytest.LogCaptureFixture) -> None:
    sagemaker = secured.client("sagemaker")
    assert sagemaker.list_models()["Models"] == []
    keys_file = secured.state_dir / "keys.json"
    keys_file.write_text("{}")
    with pytest.raises(ClientError) as raised:
        sagemaker.list_models()
    error = raised.value.response
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == (
        "UnrecognizedClientException", 403)  # was a 500 InternalFailure that named the file
    assert "no usable keys" in error["Error"]["Message"] and str(secured.state_dir) not in error["Error"]["Message"]
    chat = httpx.post(secured.url + "/v1/chat/completions", json={})  # fail closed, even unsigned
    assert chat.status_code == 401 and "no usable keys" in chat.json()["error"]["message"]
    assert str(secured.state_dir) not in chat.text
    said = [r.getMessage() for r in caplog.records if r.name == "pier.gateway" and r.levelname == "ERROR"]
    assert len(said) == 1 and f"{keys_file} is not a pier key file" in said[0]  # once, not once a request

    keys_file.unlink()
    secured.keys = create_keys(secured.state_dir)  # the file reads again: its keys work at once, no restart
    assert secured.client("sagemaker").list_models()["Models"] == []
    assert "keys.json reads again" in caplog.text
