"""POST /pier/deploy: the console's deploy, a deploy file's YAML made real by the control plane's own calls, checked
with boto3; bad files answered as the control plane answers (ValidationException, saying what to fix)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.served import Served, sagemaker, served
from tests.waiting import until

__all__ = ["sagemaker", "served"]


def deploy(served: Served, text: str) -> httpx.Response:
    return httpx.post(served.url + "/pier/deploy", content=text, headers={"Content-Type": "application/yaml"})


def deploy_until_done(served: Served, text: str) -> list[str]:
    """As the console does: the same file again until the answer waits for nothing."""
    steps: list[str] = []

    def done() -> bool:
        answer = deploy(served, text)
        assert answer.status_code == 200, answer.text
        steps.extend(answer.json()["steps"])
        return answer.json()["waiting"] is None

    until(done, what="the deploy done")
    return steps


def file(model: Path, copies: int) -> str:
    return (f"endpoint: web\ncomponents:\n  - name: web-model\n    model: {{data: {model}}}\n"
            f"    copies: {copies}\n    cpus: 1\n    memory_mb: 256\n")


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + bytes(64))
    return path


def test_a_deploy_file_becomes_an_endpoint_and_its_component(served: Served, sagemaker: Any, model: Path) -> None:
    first = deploy(served, file(model, 2)).json()
    assert first["endpoint"] == "web" and first["waiting"] == "endpoint web is Creating"
    assert [s.split(" ")[:2] for s in first["steps"]] == [["created", "model"], ["created", "endpoint"],
                                                          ["creating", "endpoint"]]
    steps = deploy_until_done(served, file(model, 2))
    assert "creating inference component web-model" in steps
    described = sagemaker.describe_inference_component(InferenceComponentName="web-model")
    assert described["RuntimeConfig"]["DesiredCopyCount"] == 2
    assert described["EndpointName"] == "web"

    assert deploy(served, file(model, 2)).json() == {"endpoint": "web", "steps": [], "waiting": None}  # no change
    assert deploy_until_done(served, file(model, 3)) == ["updating inference component web-model"]
    assert sagemaker.describe_inference_component(
        InferenceComponentName="web-model")["RuntimeConfig"]["DesiredCopyCount"] == 3


def test_pier_copies_says_where_each_copy_runs(served: Served, model: Path) -> None:
    deploy_until_done(served, file(model, 2))
    until(lambda: len(httpx.get(served.url + "/pier/copies").json()["copies"]) == 2, what="two copies")
    rows = httpx.get(served.url + "/pier/copies").json()["copies"]
    assert {r["instance"] for r in rows} == {"web/AllTraffic#0"}
    assert {r["instance_type"] for r in rows} == {"local"}
    assert sorted(len(r["cores"]) for r in rows) == [1, 1]


@pytest.mark.parametrize(("text", "says"), [
    ("endpoint: [", "is not valid YAML"),
    ("- a\n- b\n", "must hold a mapping"),
    ("endpoint: x\ncomponents: []\n", "give either `model`"),
    ("endpoint: x\nmodel: {data: /m.gguf}\nbogus: 1\n", "`bogus` is not a field pier knows"),
    ("endpoint: x\nmodel: {data: /m.gguf}\ninstance_type: ml.nothing.here\n", "ml.nothing.here"),
])
def test_a_bad_file_is_a_validation_error_saying_what_to_fix(served: Served, text: str, says: str) -> None:
    answer = deploy(served, text)
    assert answer.status_code == 400
    assert answer.json()["__type"] == "ValidationException"
    assert says in answer.json()["message"]


def test_a_failed_endpoint_ends_the_deploy_with_its_reason(served: Served, tmp_path: Path) -> None:
    text = f"endpoint: broken\nmodel: {{data: {tmp_path / 'missing.gguf'}}}\n"

    def ended() -> list[httpx.Response]:
        answer = deploy(served, text)
        return [answer] if answer.status_code != 200 else []

    [answer] = until(ended, what="the deploy ended")
    assert answer.status_code == 400 and answer.json()["__type"] == "ValidationException"
    message = answer.json()["message"]
    assert message.startswith("Endpoint broken is Failed: ") and "missing.gguf" in message
    assert "deploy a changed file" in message


DEPLOYMENT = ("deployment:\n  BlueGreenUpdatePolicy:\n    TrafficRoutingConfiguration: {Type: ALL_AT_ONCE, "
              "WaitIntervalInSeconds: 0}\n    TerminationWaitInSeconds: 0\n")


def test_a_changed_file_moves_the_endpoint_as_its_deployment_block_says(served: Served, sagemaker: Any,
                                                                       tmp_path: Path) -> None:
    """The console's deploy of a changed model is the UpdateEndpoint `pier deploy` makes, DeploymentConfig and all."""
    first, second = tmp_path / "a.gguf", tmp_path / "b.gguf"
    for path in (first, second):
        path.write_bytes(b"GGUF" + bytes(64))
    deploy_until_done(served, f"endpoint: moved\nmodel: {{data: {first}}}\n{DEPLOYMENT}")
    steps = deploy_until_done(served, f"endpoint: moved\nmodel: {{data: {second}}}\n{DEPLOYMENT}")
    assert any(step.startswith("updating endpoint moved") for step in steps)
    described = sagemaker.describe_endpoint(EndpointName="moved")
    routing = described["LastDeploymentConfig"]["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]
    assert routing["Type"] == "ALL_AT_ONCE" and described["EndpointStatus"] == "InService"


def test_a_mistyped_deployment_block_is_refused_before_anything_is_made(served: Served, sagemaker: Any,
                                                                        model: Path) -> None:
    answer = deploy(served, f"endpoint: typo\nmodel: {{data: {model}}}\ndeployment:\n  BlueGreenUpdatePolicy:\n"
                            "    TrafficRoutingConfiguration: {Type: SOMETIMES}\n")
    assert answer.status_code == 400 and "`deployment`" in answer.json()["message"]
    assert "SOMETIMES" in answer.json()["message"]
    assert sagemaker.list_endpoints()["Endpoints"] == [] and sagemaker.list_models()["Models"] == []
