"""The guard's edges on a real gateway: open and unnamed routes, oversized signed bodies, a damaged key file."""

from __future__ import annotations

import json

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.security.conftest import GENERATE, Secured


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


def test_a_damaged_key_file_refuses_everything(secured: Secured) -> None:
    sagemaker = secured.client("sagemaker")
    assert sagemaker.list_models()["Models"] == []
    (secured.state_dir / "keys.json").write_text("{damaged")
    with pytest.raises(ClientError) as raised:
        sagemaker.list_models()
    error = raised.value.response
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == ("InternalFailure", 500)
    assert "not a pier key file" in error["Error"]["Message"]
    assert httpx.post(secured.url + "/v1/chat/completions", json={}).status_code == 500  # fail closed, even unsigned
