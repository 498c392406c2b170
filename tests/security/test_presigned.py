"""Signatures in the query string: presigned URLs, and the `sagemaker-api-key-` bearer tokens AWS's
OpenAI-compatible endpoints take (a presigned request, base64), through a real gateway."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import openai
import pytest

from tests.security.conftest import Secured, chat
from tests.security.tokens import presigned_url, sagemaker_api_key


def test_a_presigned_url_is_accepted_until_it_expires(secured: Secured) -> None:
    admin = secured.keys["admin"].stored
    fresh = presigned_url(f"{secured.url}/pier/copies", admin.access_key_id, secured.keys["admin"].secret_access_key)
    assert httpx.get(fresh).json() == {"copies": []}
    old = datetime.now(UTC).replace(tzinfo=None) - timedelta(minutes=10)
    stale = presigned_url(f"{secured.url}/pier/copies", admin.access_key_id, secured.keys["admin"].secret_access_key,
                          signed_at=old, expires_s=300)
    reply = httpx.get(stale)
    assert (reply.status_code, reply.headers["x-amzn-ErrorType"]) == (403, "InvalidSignatureException")
    assert reply.json()["message"].startswith("Signature expired:")


def test_a_presigned_url_with_a_changed_query_is_refused(secured: Secured) -> None:
    key = secured.keys["admin"]
    url = presigned_url(f"{secured.url}/pier/copies/c1/logs?lines=5", key.stored.access_key_id, key.secret_access_key)
    assert httpx.get(url).text == "log of c1\n"  # the fake backend's log
    reply = httpx.get(url.replace("lines=5", "lines=500"))
    assert (reply.status_code, reply.headers["x-amzn-ErrorType"]) == (403, "InvalidSignatureException")


def test_a_presigned_url_and_an_authorization_header_together_are_refused(secured: Secured) -> None:
    key = secured.keys["admin"]
    url = presigned_url(f"{secured.url}/pier/copies", key.stored.access_key_id, key.secret_access_key)
    reply = httpx.get(url, headers={"Authorization": f"Bearer {key.api_key}"})
    assert (reply.status_code, reply.headers["x-amzn-ErrorType"]) == (400, "IncompleteSignatureException")


def test_the_openai_client_works_with_a_sagemaker_api_key(secured: Secured) -> None:
    secured.deploy("chat")
    key = secured.keys["invoker"]
    token = sagemaker_api_key(key.stored.access_key_id, key.secret_access_key)
    client = openai.OpenAI(base_url=f"{secured.url}/endpoints/chat/v1", api_key=token, max_retries=0)
    assert chat(client, "any").choices[0].message is not None


@pytest.mark.parametrize("problem", ["expired", "wrong secret", "unknown key", "not base64"])
def test_a_bad_sagemaker_api_key_is_401(secured: Secured, problem: str) -> None:
    key = secured.keys["invoker"]
    key_id, secret = key.stored.access_key_id, key.secret_access_key
    token = {
        "expired": lambda: sagemaker_api_key(key_id, secret, expires_s=60,
                                             signed_at=datetime.now(UTC).replace(tzinfo=None) - timedelta(hours=1)),
        "wrong secret": lambda: sagemaker_api_key(key_id, "wrong"),
        "unknown key": lambda: sagemaker_api_key("PIERAAAAAAAAAAAAAAAA", secret),
        "not base64": lambda: "sagemaker-api-key-%%%",
    }[problem]()
    client = openai.OpenAI(base_url=f"{secured.url}/v1", api_key=token, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        chat(client, "chat")
