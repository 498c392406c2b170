"""The CLI's client over a gateway with a fake backend: deploy (and redeploy), ls, describe, logs, delete."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pier.client.deploy_file import load
from pier.client.pier_client import PierClient, PierClientError
from tests.gateway.served import Served


@pytest.fixture
def client(served: Served) -> PierClient:
    return PierClient(served.url)


def deploy_file(tmp_path: Path, text: str) -> Path:
    (tmp_path / "tiny.gguf").write_bytes(b"GGUF")
    path = tmp_path / "pier.yaml"
    path.write_text(text)
    return path


def deploy(client: PierClient, path: Path) -> list[str]:
    said: list[str] = []
    client.deploy(load(path), path.parent, say=said.append, timeout_s=30)
    return said


def test_deploy_a_classic_endpoint_then_nothing_changes_on_redeploy(client: PierClient, served: Served,
                                                                    tmp_path: Path) -> None:
    path = deploy_file(tmp_path, "endpoint: chat\nmodel: {data: tiny.gguf}\n")
    said = deploy(client, path)
    assert "creating endpoint chat" in said and said[-1] == "endpoint chat is InService"
    [row] = client.endpoints()
    assert (row.name, row.status, row.instance_type, row.copies_ready, row.copies_wanted) == (
        "chat", "InService", "local", 1, 1)
    assert row.serves.startswith("chat-")
    assert deploy(client, path) == ["endpoint chat is InService"]  # nothing to create or update
    assert len(served.backend.started) == 1

    path.write_text("endpoint: chat\ninstance_count: 2\nmodel: {data: tiny.gguf}\n")
    said = deploy(client, path)
    assert any(s.startswith("updating endpoint chat to chat-") for s in said)
    assert client.endpoints()[0].copies_ready == 2


def test_deploy_components_describe_logs_delete(client: PierClient, served: Served, tmp_path: Path) -> None:
    path = deploy_file(tmp_path, """
endpoint: host
components:
  - {name: a, model: {data: tiny.gguf}, copies: 2, cpus: 1, memory_mb: 256}
  - {name: b, model: {data: tiny.gguf}, memory_mb: 256}
""")
    deploy(client, path)
    [row] = client.endpoints()
    assert (row.serves, row.copies_ready, row.copies_wanted) == ("a, b", 3, 3)
    described = client.describe("host")
    assert described["endpoint"]["EndpointStatus"] == "InService"
    assert sorted(c["InferenceComponentName"] for c in described["components"]) == ["a", "b"]
    assert len(described["copies"]) == 3
    assert len(client.describe("a")["copies"]) == 2
    logs = client.logs("a")
    assert len(logs) == 2 and all(text.startswith("log of a-") for text in logs.values())

    path.write_text("endpoint: host\ncomponents: [{name: a, model: {data: tiny.gguf}, copies: 1, cpus: 1, "
                    "memory_mb: 256}]\n")
    said = deploy(client, path)
    assert "updating inference component a" in said and "deleting inference component b (not in the file)" in said

    said = []
    client.delete("host", say=said.append)
    assert client.endpoints() == []
    # What the endpoint used goes with it; b's model was left by the redeploy that dropped b, as SageMaker leaves it.
    assert [m["ModelName"][:2] for m in client.sagemaker.list_models()["Models"]] == ["b-"]
    assert client.sagemaker.list_endpoint_configs()["EndpointConfigs"] == []
    assert served.backend.copies == {}


def test_a_failed_deploy_says_why(client: PierClient, tmp_path: Path) -> None:
    path = tmp_path / "pier.yaml"
    path.write_text("endpoint: chat\nmodel: {data: missing.gguf}\n")
    with pytest.raises(PierClientError, match=r"Endpoint chat is Failed: No model at .*missing.gguf"):
        deploy(client, path)


def test_no_gateway_is_said_plainly() -> None:
    from tests.sockets import free_port

    with pytest.raises(PierClientError, match=r"No pier gateway answers at http://127.0.0.1:\d+ .*`pier up`"):
        PierClient(f"http://127.0.0.1:{free_port()}").ping()


def test_unknown_names(client: PierClient) -> None:
    client.ping()
    with pytest.raises(PierClientError, match="No endpoint or inference component is called x"):
        client.describe("x")
    with pytest.raises(PierClientError, match="No endpoint is called x"):
        client.delete("x")


def test_a_bad_update_rolls_back_and_says_so(client: PierClient, tmp_path: Path) -> None:
    path = deploy_file(tmp_path, "endpoint: chat\nmodel: {data: tiny.gguf}\n")
    deploy(client, path)
    [before] = client.endpoints()
    path.write_text("endpoint: chat\nmodel: {data: missing.gguf}\n"
                    "deployment: {BlueGreenUpdatePolicy: {TrafficRoutingConfiguration: {Type: ALL_AT_ONCE, "
                    "WaitIntervalInSeconds: 0}}}\n")
    said: list[str] = []
    with pytest.raises(PierClientError, match=r"The update of endpoint chat rolled back: .*still serves chat-"):
        client.deploy(load(path), path.parent, say=said.append, timeout_s=60)
    [after] = client.endpoints()
    assert (after.status, after.serves) == ("InService", before.serves)  # the old config serves on


def test_a_deployment_block_that_is_no_deployment_config_says_so(client: PierClient, tmp_path: Path) -> None:
    path = deploy_file(tmp_path, "endpoint: chat\nmodel: {data: tiny.gguf}\n")
    deploy(client, path)
    (tmp_path / "other.gguf").write_bytes(b"GGUF2")
    path.write_text("endpoint: chat\nmodel: {data: other.gguf}\n"
                    "deployment: {BlueGreenUpdatePolicy: {TrafficRoutingConfiguration: {Type: ALL_AT_ONCE}}}\n")
    with pytest.raises(PierClientError,
                       match=r"(?s)`deployment` is not a SageMaker DeploymentConfig: .*WaitIntervalInSeconds"):
        deploy(client, path)


@pytest.mark.parametrize(("described", "shown"), [
    ({"EndpointStatus": "Creating"}, "Creating"),
    ({"EndpointStatus": "Updating", "PendingDeploymentSummary": {"EndpointConfigName": "chat-2", "ProductionVariants": [
        {"CurrentWeight": 0.5, "DesiredWeight": 1.0,
         "VariantStatus": [{"Status": "Baking", "StatusMessage": "canary: baking"}]}]}},
     "Updating: to chat-2, canary: baking, 50% of its traffic moved"),
    ({"EndpointStatus": "Updating", "PendingDeploymentSummary": {"EndpointConfigName": "chat-2",
                                                                "ProductionVariants": []}},
     "Updating: to chat-2, starting, 0% of its traffic moved"),
])
def test_an_update_shows_where_it_stands(described: dict[str, Any], shown: str) -> None:
    from pier.client.pier_client import update_progress

    assert update_progress(described) == shown


def test_a_fixed_file_deploys_over_a_failed_endpoint(client: PierClient, tmp_path: Path) -> None:
    """SageMaker updates a Failed endpoint; a newcomer's typo in a model path must not need a `pier delete`."""
    path = tmp_path / "pier.yaml"
    path.write_text("endpoint: chat\nmodel: {data: missing.gguf}\n")
    with pytest.raises(PierClientError, match="Endpoint chat is Failed"):
        deploy(client, path)
    path = deploy_file(tmp_path, "endpoint: chat\nmodel: {data: tiny.gguf}\n")
    said = deploy(client, path)
    assert any(s.startswith("updating endpoint chat to chat-") for s in said), said
    [row] = client.endpoints()
    assert (row.status, row.copies_ready) == ("InService", 1)


def test_a_failed_endpoint_deployed_again_unchanged_is_created_again(client: PierClient, tmp_path: Path) -> None:
    """The cause fixed outside the file (the model file put in place): the same config is tried again."""
    path = tmp_path / "pier.yaml"
    path.write_text("endpoint: chat\nmodel: {data: missing.gguf}\n")
    with pytest.raises(PierClientError, match="Endpoint chat is Failed"):
        deploy(client, path)
    (tmp_path / "missing.gguf").write_bytes(b"GGUF")
    said = deploy(client, path)
    assert any("is Failed with this same config" in s for s in said), said
    [row] = client.endpoints()
    assert (row.status, row.copies_ready) == ("InService", 1)


def test_a_bad_deployment_block_is_refused_on_the_first_deploy_before_anything_is_made(
        client: PierClient, tmp_path: Path) -> None:
    """UpdateEndpoint alone carries it: unchecked, the typo would wait for the first changed file."""
    path = deploy_file(tmp_path, "endpoint: chat\nmodel: {data: tiny.gguf}\n"
                                 "deployment: {BlueGreenUpdatePolicy: {TrafficRoutingConfiguration: "
                                 "{Type: CANRY, WaitIntervalInSeconds: 0}}}\n")
    with pytest.raises(PierClientError, match=r"`deployment` is not a SageMaker DeploymentConfig: .*'CANRY'"):
        deploy(client, path)
    assert client.sagemaker.list_models()["Models"] == [] and client.endpoints() == []
