from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pier.client.deploy_file import DeployFileError, calls, load


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pier.yaml"
    path.write_text(text)
    return path


def test_a_classic_endpoint(tmp_path: Path) -> None:
    path = write(tmp_path, """
endpoint: chat
instance_type: ml.c7g.xlarge
instance_count: 2
model:
  data: models/tiny.gguf
  image: pier
  environment: {MAX_TOTAL_TOKENS: 4096, MESSAGES_API_ENABLED: true}
""")
    todo = calls(load(path), path.parent)
    [model] = todo.models
    assert model["ModelName"].startswith("chat-")
    assert model["PrimaryContainer"] == {
        "ModelDataUrl": str(tmp_path / "models" / "tiny.gguf"), "Image": "pier",
        "Environment": {"MAX_TOTAL_TOKENS": "4096", "MESSAGES_API_ENABLED": "true"}}
    assert todo.config["ProductionVariants"] == [{
        "VariantName": "AllTraffic", "InstanceType": "ml.c7g.xlarge", "InitialInstanceCount": 2,
        "ModelName": model["ModelName"]}]
    assert todo.endpoint == {"EndpointName": "chat", "EndpointConfigName": todo.config["EndpointConfigName"]}
    assert todo.components == []


def test_inference_components(tmp_path: Path) -> None:
    path = write(tmp_path, """
endpoint: host
components:
  - name: small
    model: {data: "hf://org/repo/small.gguf"}
    copies: 2
    cpus: 1
    memory_mb: 512
  - name: big
    model: {data: "s3://bucket/big/"}
""")
    todo = calls(load(path), path.parent)
    assert [m["PrimaryContainer"]["ModelDataUrl"] for m in todo.models] == ["hf://org/repo/small.gguf",
                                                                          "s3://bucket/big/"]
    assert "ModelName" not in todo.config["ProductionVariants"][0]
    small, big = todo.components
    assert small["Specification"] == {"ModelName": todo.models[0]["ModelName"], "ComputeResourceRequirements": {
        "MinMemoryRequiredInMb": 512, "NumberOfCpuCoresRequired": 1.0}}
    assert small["RuntimeConfig"] == {"CopyCount": 2}
    assert big["Specification"]["ComputeResourceRequirements"] == {"MinMemoryRequiredInMb": 1024}


def test_names_follow_content(tmp_path: Path) -> None:
    first = calls(load(write(tmp_path, "endpoint: e\nmodel: {data: /m}\n")), tmp_path)
    same = calls(load(write(tmp_path, "endpoint: e\nmodel: {data: /m}\n")), tmp_path)
    changed = calls(load(write(tmp_path, "endpoint: e\nmodel: {data: /m2}\n")), tmp_path)
    assert first == same
    assert first.models[0]["ModelName"] != changed.models[0]["ModelName"]
    assert first.config["EndpointConfigName"] != changed.config["EndpointConfigName"]


@pytest.mark.parametrize(("text", "problem"), [
    ("endpoint: e\n", "give either `model` (served on every instance) or `components`"),
    ("endpoint: bad_name\nmodel: {data: /m}\n", "`endpoint` String should match pattern"),
    ("endpoint: e\nmodel: {data: /m, enviroment: {}}\n", "`model.enviroment` is not a field pier knows"),
    ("endpoint: e\ncomponents: [{name: a, model: {data: /m}, copies: -1}]\n", "`components.0.copies`"),
    ("endpoint: e\nmodel: {data: /m}\ncomponents: [{name: a, model: {data: /m}}]\n", "not both or neither"),
    ("- a list\n", "must hold a mapping"),
    ("endpoint: [unclosed\n", "is not valid YAML"),
])
def test_mistakes_name_the_field(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(DeployFileError) as raised:
        load(write(tmp_path, text))
    assert problem in str(raised.value)
    assert "pier.yaml" in str(raised.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DeployFileError, match=r"Cannot read .*nope\.yaml"):
        load(tmp_path / "nope.yaml")


@pytest.mark.parametrize(("routing", "expected"), [
    ("", None),
    ("routing: {strategy: RANDOM}", {"RoutingStrategy": "RANDOM"}),
    ("routing: {strategy: PREFIX_AWARE, prefix_length: 2048, concurrency_threshold: 4}",
     {"RoutingStrategy": "PREFIX_AWARE",
      "PrefixAwareRoutingConfig": {"PrefixLength": 2048, "ConcurrencyThreshold": 4}}),
])
def test_routing_becomes_the_variants_routing_config(tmp_path: Path, routing: str,
                                                     expected: dict[str, object] | None) -> None:
    path = write(tmp_path, f"endpoint: chat\n{routing}\nmodel: {{data: models/tiny.gguf}}\n")
    [variant] = calls(load(path), path.parent).config["ProductionVariants"]
    assert variant.get("RoutingConfig") == expected


def test_an_unknown_routing_strategy_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "endpoint: chat\nrouting: {strategy: ROUND_ROBIN}\nmodel: {data: m.gguf}\n")
    with pytest.raises(DeployFileError, match=r"routing\.strategy"):
        load(path)


def test_a_deployment_block_goes_to_update_endpoint(tmp_path: Path) -> None:
    from pier.client.deploy_file import calls, parse

    policy = {"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {
        "Type": "CANARY", "CanarySize": {"Type": "INSTANCE_COUNT", "Value": 1}, "WaitIntervalInSeconds": 60}}}
    file = parse("endpoint: chat\nmodel: {data: m.gguf}\ndeployment:\n" + "\n".join(
        "  " + line for line in __import__("yaml").safe_dump(policy).splitlines()), "pier.yaml")
    assert calls(file, tmp_path).deployment == policy


@pytest.mark.parametrize(("deployment", "problem"), [
    ({"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {"Typo": "ALL_AT_ONCE"}}},
     'Unknown parameter in deployment.BlueGreenUpdatePolicy.TrafficRoutingConfiguration: "Typo"'),
    ({"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {"Type": "CANRY", "WaitIntervalInSeconds": 0}}},
     "deployment.BlueGreenUpdatePolicy.TrafficRoutingConfiguration.Type: 'CANRY' is not one of ALL_AT_ONCE, CANARY"),
    ({"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {"Type": "CANARY", "WaitIntervalInSeconds": "soon"}}},
     "Invalid type for parameter deployment.BlueGreenUpdatePolicy.TrafficRoutingConfiguration"
     ".WaitIntervalInSeconds"),
])
def test_deployment_problems_name_their_place(deployment: dict[str, Any], problem: str) -> None:
    from pier.client.deploy_file import deployment_problems

    assert any(problem in line for line in deployment_problems(deployment)), deployment_problems(deployment)


def test_the_readme_s_deployment_block_has_no_problem() -> None:
    from pier.client.deploy_file import deployment_problems

    assert deployment_problems({"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {
        "Type": "CANARY", "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 50}, "WaitIntervalInSeconds": 60}}}) == []
