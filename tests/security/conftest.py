"""A gateway with keys, served by uvicorn on a loopback port, its copies being one real model server over the
fake engine; and the clients users have (boto3, the sagemaker SDK, openai), signed with created keys."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import openai
import pytest
from botocore.config import Config
from openai.types.chat import ChatCompletion

from pier.gateway.app import create_gateway
from pier.security.keystore import IssuedKey, KeyStore
from pier.security.principal import Role
from tests.backends.conftest import model_dir  # noqa: F401  (the TINY model folder, for e2e tests)
from tests.control.fakes import ServingBackend
from tests.runtime.servers import CopyServer, copy_server
from tests.sockets import serving

REGION = "us-east-1"
GENERATE = {"inputs": "the quick brown fox", "parameters": {"max_new_tokens": 4}}
WAIT = {"Delay": 1, "MaxAttempts": 30}


@dataclass
class Secured:
    url: str
    state_dir: Path
    model_dir: Path
    keys: dict[str, IssuedKey]

    def client(self, service: str, who: str = "admin", *, secret: str | None = None, key_id: str | None = None,
               **config: Any) -> Any:
        """boto3 exactly as a SageMaker user has it: only the endpoint URL and the credentials are pier's (any
        credentials, on a gateway without keys)."""
        key = self.keys.get(who)
        return boto3.client(
            service, endpoint_url=self.url, region_name=REGION,
            aws_access_key_id=key_id or (key.stored.access_key_id if key else "any"),
            aws_secret_access_key=secret or (key.secret_access_key if key else "any"),
            config=Config(retries={"max_attempts": 1}, **config))

    def deploy(self, name: str) -> None:
        """The seeds' flow: model, endpoint config, endpoint, then the waiter, with the admin key."""
        sagemaker = self.client("sagemaker")
        sagemaker.create_model(ModelName=name, ExecutionRoleArn="arn:aws:iam::1:role/sagemaker",
                               PrimaryContainer={"Image": "pier", "ModelDataUrl": f"file://{self.model_dir}"})
        sagemaker.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": name, "InstanceType": "local", "InitialInstanceCount": 1}])
        sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name)
        sagemaker.get_waiter("endpoint_in_service").wait(EndpointName=name, WaiterConfig=WAIT)


@pytest.fixture(scope="module")
def copy() -> Iterator[CopyServer]:
    with copy_server() as server:
        yield server


def model_folder(root: Path) -> Path:
    folder = root / "model"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "m.gguf").write_bytes(b"GGUF")  # the fake backend never reads it
    return folder


def create_keys(state_dir: Path) -> dict[str, IssuedKey]:
    store = KeyStore.in_state_dir(state_dir)
    return {
        "admin": store.create("admin", Role.ADMIN),
        "invoker": store.create("invoker", Role.INVOKE),
        "limited": store.create("limited", Role.INVOKE, ["allowed"]),
    }


@pytest.fixture
def secured(tmp_path: Path, copy: CopyServer) -> Iterator[Secured]:
    state_dir = tmp_path / "state"
    keys = create_keys(state_dir)
    app = create_gateway(state_dir, backend=ServingBackend(copy.url), tick_s=0.05)
    with serving(app, lifespan="on") as url:
        yield Secured(url, state_dir, model_folder(tmp_path), keys)


@pytest.fixture
def open_gateway(tmp_path: Path, copy: CopyServer) -> Iterator[Secured]:
    """A gateway without keys (the laptop default): no authentication, but Host and Origin still checked."""
    state_dir = tmp_path / "state"
    app = create_gateway(state_dir, backend=ServingBackend(copy.url), tick_s=0.05)
    with serving(app, lifespan="on") as url:
        yield Secured(url, state_dir, model_folder(tmp_path), {})


@pytest.fixture
def audit_lines(caplog: pytest.LogCaptureFixture) -> Iterator[list[str]]:
    """The audit log as it is written."""
    caplog.set_level(logging.INFO, logger="pier.audit")
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = Collect()
    logging.getLogger("pier.audit").addHandler(handler)
    try:
        yield lines
    finally:
        logging.getLogger("pier.audit").removeHandler(handler)


def wait_for(condition: Any, timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.02)
    raise AssertionError(f"not true within {timeout} s")


def chat(client: openai.OpenAI, model: str, max_tokens: int = 2) -> ChatCompletion:
    """One chat completion through the openai client, as an application sends it."""
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}],
                                          max_tokens=max_tokens)
