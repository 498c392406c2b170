"""The `pier` CLI's client against a gateway with keys: it signs every call (SageMaker's through boto3, pier's own
routes and chat through httpx) with one access key, found in PIER_ACCESS_KEY_ID or the local key file."""

from __future__ import annotations

from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from pier.cli.serve import session_key
from pier.client.deploy_file import DeployFile, ModelBlock
from pier.client.pier_client import PierClient
from pier.gateway.app import create_gateway
from pier.gateway.settings import GatewaySettings
from pier.security.client_credentials import PLACEHOLDER, cli_credentials
from pier.security.keystore import KeyStore
from pier.security.principal import Role
from pier.security.settings import SecuritySettings
from tests.control.fakes import ServingBackend
from tests.runtime.servers import CopyServer
from tests.security.conftest import Secured, create_keys
from tests.sockets import serving


def credentials(secured: Secured, who: str) -> tuple[str, str]:
    key = secured.keys[who]
    return key.stored.access_key_id, key.secret_access_key


def test_the_cli_client_deploys_lists_reads_logs_and_chats_with_a_key(secured: Secured) -> None:
    client = PierClient(secured.url, credentials=credentials(secured, "admin"))
    client.deploy(DeployFile(endpoint="cli", model=ModelBlock(data=str(secured.model_dir))), Path.cwd(),
                  timeout_s=30)
    assert [(row.name, row.status) for row in client.endpoints()] == [("cli", "InService")]
    assert [copy["state"] for copy in client.copies("cli")] == ["Ready"]  # GET /pier/copies, signed
    assert list(client.logs("cli").values()) == [f"log of {client.copies('cli')[0]['copy_id']}\n"]
    assert "".join(client.chat("cli", [{"role": "user", "content": "hi"}], max_tokens=3))  # POST /v1/..., signed


def test_the_cli_client_with_an_invoke_key_calls_but_cannot_deploy(secured: Secured) -> None:
    PierClient(secured.url, credentials=credentials(secured, "admin")).deploy(
        DeployFile(endpoint="cli", model=ModelBlock(data=str(secured.model_dir))), Path.cwd(), timeout_s=30)
    invoker = PierClient(secured.url, credentials=credentials(secured, "invoker"))
    assert "".join(invoker.chat("cli", [{"role": "user", "content": "hi"}], max_tokens=2))
    with pytest.raises(ClientError, match="AccessDeniedException"):
        invoker.deploy(DeployFile(endpoint="other", model=ModelBlock(data=str(secured.model_dir))), Path.cwd())


def test_which_credentials_the_cli_uses(tmp_path: Path) -> None:
    url = "http://127.0.0.1:8080"
    assert cli_credentials(url, {"PIER_STATE_DIR": str(tmp_path)}) == PLACEHOLDER  # no keys: any will do
    store = KeyStore.in_state_dir(tmp_path)
    store.create("reader", Role.INVOKE)
    admin = store.create("root", Role.ADMIN).stored
    local = {"PIER_STATE_DIR": str(tmp_path)}
    assert cli_credentials(url, local) == (admin.access_key_id, admin.secret_access_key)
    assert cli_credentials("http://localhost:9000", local) == (admin.access_key_id, admin.secret_access_key)
    assert cli_credentials("http://gpu-box:8080", local) == PLACEHOLDER  # a remote gateway: not this file's keys
    given = {**local, "PIER_ACCESS_KEY_ID": "PIERGIVEN", "PIER_SECRET_ACCESS_KEY": "s"}
    assert cli_credentials(url, given) == ("PIERGIVEN", "s")


def test_the_cli_client_finds_the_local_admin_key(secured: Secured, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIER_STATE_DIR", str(secured.state_dir))
    monkeypatch.delenv("PIER_ACCESS_KEY_ID", raising=False)
    assert PierClient(secured.url).endpoints() == []


def test_pier_serves_session_key_works_in_its_own_gateway_only(tmp_path: Path, copy: CopyServer) -> None:
    """`pier serve` deploys through its own gateway with a key that lives in its memory only."""
    state_dir = tmp_path / "state"
    create_keys(state_dir)  # the user's keys turn authentication on
    session = session_key()
    security = SecuritySettings(session_keys=(session.stored,))
    app = create_gateway(state_dir, backend=ServingBackend(copy.url), tick_s=0.05,
                         settings=GatewaySettings(security=security))
    own = (session.stored.access_key_id, session.secret_access_key)
    with serving(app, lifespan="on") as url:
        assert PierClient(url, credentials=own).endpoints() == []
    assert session.stored.access_key_id not in (state_dir / "keys.json").read_text()
    other = create_gateway(tmp_path / "other", backend=ServingBackend(copy.url))
    create_keys(tmp_path / "other")
    with serving(other, lifespan="on") as url, pytest.raises(ClientError, match="UnrecognizedClient"):
        PierClient(url, credentials=own).endpoints()
