"""deploy/kuberay: the RayCluster, the gateway's Deployment and the pier settings between them must agree, or the
gateway waits forever for capacity no pod offers. No Kubernetes here: each piece is read the way its consumer reads
it (KubeRay's string maps, Ray's resources JSON, pier's own Ray configuration and command line)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement

from pier.backends.ray.config import RayConfig
from pier.control.instance_types import lookup
from pier.gateway.run import arguments

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "deploy" / "kuberay"
UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "K": 10**3, "M": 10**6, "G": 10**9}


def documents() -> dict[str, dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all((FOLDER / "pier.yaml").read_text()) if d]
    return {d["kind"]: d for d in docs}


def cluster() -> dict[str, Any]:
    return documents()["RayCluster"]


def gateway_pod() -> dict[str, Any]:
    spec: dict[str, Any] = documents()["Deployment"]["spec"]["template"]["spec"]
    return spec


def gateway_args() -> Any:
    container = gateway_pod()["containers"][0]
    assert container["command"] == ["python", "-m", "pier.gateway"]
    return arguments().parse_args([str(a) for a in container["args"]])


def ray_yaml() -> RayConfig:
    return RayConfig.model_validate(yaml.safe_load(documents()["ConfigMap"]["data"]["ray.yaml"]))


def memory_bytes(quantity: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([KMG]i?)?", quantity).groups()  # type: ignore[union-attr]
    return int(number) * UNITS.get(unit or "", 1)


def images() -> list[str]:
    head = cluster()["spec"]["headGroupSpec"]["template"]["spec"]["containers"]
    workers = [c for g in cluster()["spec"]["workerGroupSpecs"] for c in g["template"]["spec"]["containers"]]
    gateway = gateway_pod()["initContainers"] + gateway_pod()["containers"]
    return [c["image"] for c in head + workers + gateway]


def test_every_ray_start_param_is_a_string_as_kuberay_s_crd_requires() -> None:
    groups = [cluster()["spec"]["headGroupSpec"], *cluster()["spec"]["workerGroupSpecs"]]
    for group in groups:
        assert all(isinstance(v, str) for v in group["rayStartParams"].values()), group["rayStartParams"]
    assert cluster()["spec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"  # no instance on the head


def test_one_ray_version_everywhere_and_one_pier_accepts() -> None:
    version = cluster()["spec"]["rayVersion"]
    assert all(image.endswith(f":{version}") for image in images()), images()
    assert (FOLDER / "Dockerfile").read_text().count(f"FROM rayproject/ray:{version}-py311") == 1
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["ray"]
    ray = next(Requirement(r) for r in extras if Requirement(r).name == "ray")
    assert "client" in ray.extras  # ray:// addresses work from the image too
    assert ray.specifier.contains(version)


@pytest.mark.parametrize("group", range(len(cluster()["spec"]["workerGroupSpecs"])))
def test_each_worker_pod_holds_exactly_one_instance_of_its_type(group: int) -> None:
    spec = cluster()["spec"]["workerGroupSpecs"][group]
    offered = json.loads(json.loads(spec["rayStartParams"]["resources"]))  # KubeRay's quoted JSON string
    limits = spec["template"]["spec"]["containers"][0]["resources"]["limits"]
    matching = [(name, mapping) for name, mapping in ray_yaml().instance_types.items()
                if mapping.resources and set(mapping.resources) <= set(offered)]
    assert len(matching) == 1, f"worker group {spec['groupName']} offers {offered}: which instance type is it?"
    name, mapping = matching[0]
    assert mapping.resources is not None
    assert all(offered[k] // v == 1 for k, v in mapping.resources.items())  # one instance per pod, not two
    itype = lookup(name)
    assert int(limits["cpu"]) >= itype.vcpus  # the copies pin threads to the instance's vCPUs
    assert memory_bytes(limits["memory"]) >= itype.memory_mb * 2**20
    assert spec["minReplicas"] <= spec["replicas"] <= spec["maxReplicas"]


def test_the_gateway_s_command_line_joins_this_cluster_with_this_configuration() -> None:
    args = gateway_args()
    assert args.backend == "ray"
    assert args.ray_address == f"{cluster()['metadata']['name']}-head-svc:6379"  # KubeRay's head service
    mounts = {m["name"]: m["mountPath"] for m in gateway_pod()["containers"][0]["volumeMounts"]}
    assert args.ray_config == Path(mounts["ray-config"]) / "ray.yaml"
    assert str(args.state_dir) == mounts["state"]
    volumes = {v["name"]: v for v in gateway_pod()["volumes"]}
    assert volumes["state"]["persistentVolumeClaim"]["claimName"] == documents()["PersistentVolumeClaim"][
        "metadata"]["name"]
    assert volumes["ray-config"]["configMap"]["name"] == documents()["ConfigMap"]["metadata"]["name"]


def test_the_gateway_listens_beyond_loopback_only_with_keys_in_its_state_folder() -> None:
    args = gateway_args()
    assert args.host == "0.0.0.0" and not args.insecure
    keys = gateway_pod()["initContainers"][0]
    script = " ".join(keys["command"])
    assert f"{args.state_dir}/keys.json" in script and "-m 0600" in script and "-m 0700" in script
    assert "[ -e /state/keys.json ] ||" in script  # keys made or revoked later with `pier keys` are kept
    assert {v["name"]: v for v in gateway_pod()["volumes"]}["keys"]["secret"]["secretName"] == "pier-keys"


def test_the_service_reaches_the_gateway_and_the_gateway_answers_to_its_name() -> None:
    args = gateway_args()
    service = documents()["Service"]
    deployment = documents()["Deployment"]
    assert service["spec"]["selector"] == deployment["spec"]["template"]["metadata"]["labels"]
    assert service["metadata"]["name"] in args.allow_host  # in-cluster clients send Host: pier-gateway
    port = gateway_pod()["containers"][0]["ports"][0]
    assert port["containerPort"] == args.port and service["spec"]["ports"][0]["targetPort"] == port["name"]
    assert gateway_pod()["containers"][0]["readinessProbe"]["httpGet"]["path"] == "/ping"


def test_one_gateway_at_a_time_and_it_drains_before_kubernetes_kills_it() -> None:
    deployment = documents()["Deployment"]
    assert deployment["spec"]["replicas"] == 1  # one gateway per state folder and namespace
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    assert gateway_pod()["terminationGracePeriodSeconds"] > gateway_args().grace_period


def test_the_ray_configuration_loads_as_the_gateway_loads_it(tmp_path: Path) -> None:
    path = tmp_path / "ray.yaml"
    path.write_text(documents()["ConfigMap"]["data"]["ray.yaml"])
    config = RayConfig.load(path, address=gateway_args().ray_address)
    assert not config.own_cluster and config.capacity_wait_s >= 300  # room for the autoscaler to add a pod
