"""The guard's door in a gateway served in-process: expired keys refused with AWS's code for an expired credential
(boto3, openai), expiry never opening a gateway, and `pier serve`'s session key still getting through a shut door."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import openai
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from pier.gateway.app import create_gateway
from pier.gateway.settings import GatewaySettings
from pier.security.keystore import IssuedKey, KeyStore, issue
from pier.security.principal import Role
from pier.security.settings import SecuritySettings
from tests.control.fakes import ServingBackend
from tests.sockets import serving

SESSION = issue("pier-serve", Role.ADMIN)


@pytest.fixture
def wide(tmp_path: Path) -> Iterator[tuple[str, KeyStore]]:
    """A gateway that listens beyond loopback (as far as its guard knows), with `pier serve`'s session key."""
    store = KeyStore.in_state_dir(tmp_path / "state")
    security = SecuritySettings.from_env({}, bind_host="0.0.0.0", session_keys=[SESSION.stored])
    app = create_gateway(tmp_path / "state", backend=ServingBackend("http://127.0.0.1:9"),
                         settings=GatewaySettings(security=security))
    with serving(app, lifespan="on") as url:
        yield url, store


def sagemaker(url: str, key: IssuedKey) -> Any:
    return boto3.client("sagemaker", endpoint_url=url, region_name="us-east-1", config=Config(retries={
        "max_attempts": 1}), aws_access_key_id=key.stored.access_key_id, aws_secret_access_key=key.secret_access_key)


def test_an_expired_key_is_refused_and_expiry_never_opens(wide: tuple[str, KeyStore]) -> None:
    url, store = wide
    lasting = store.create("lasting", Role.ADMIN)
    brief = store.create("brief", Role.ADMIN, expires=time.time() + 1.5)
    assert sagemaker(url, brief).list_models()["Models"] == []
    time.sleep(1.6)
    with pytest.raises(ClientError) as raised:
        sagemaker(url, brief).list_models()
    error = raised.value.response["Error"]
    assert error["Code"] == "ExpiredTokenException" and "pier key 'brief' expired at" in error["Message"]
    with pytest.raises(openai.AuthenticationError, match="expired"):
        openai.OpenAI(base_url=f"{url}/v1", api_key=brief.api_key, max_retries=0).models.list()
    assert sagemaker(url, lasting).list_models()["Models"] == []

    store.revoke("lasting")  # only an expired key is left: shut, not open
    with pytest.raises(ClientError) as raised:
        sagemaker(url, brief).list_models()
    assert raised.value.response["Error"]["Code"] == "UnrecognizedClientException"
    assert "has expired" in raised.value.response["Error"]["Message"]


def test_the_session_key_gets_through_a_shut_door(wide: tuple[str, KeyStore]) -> None:
    url, store = wide
    assert not store.has_keys()
    assert sagemaker(url, SESSION).list_models()["Models"] == []
    with pytest.raises(openai.AuthenticationError, match="pier keys create NAME --role admin"):
        openai.OpenAI(base_url=f"{url}/v1", api_key="pier-nothing", max_retries=0).models.list()
