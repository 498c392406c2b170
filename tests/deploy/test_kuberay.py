"""deploy/kuberay: the RayCluster (its GCS kept in the manifest's Redis), the two gateways' Deployment and the pier
settings between them must agree, or the gateway waits forever for capacity no pod offers. No Kubernetes here:
each piece is read the way its consumer reads it (KubeRay's string maps, Ray's resources JSON, pier's own Ray
configuration and command line)."""

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


def documents() -> dict[tuple[str, str], dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all((FOLDER / "pier.yaml").read_text()) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def only(kind: str) -> dict[str, Any]:
    (document,) = [d for (k, _), d in documents().items() if k == kind]
    return document


def cluster() -> dict[str, Any]:
    return only("RayCluster")


def gateway_pod() -> dict[str, Any]:
    spec: dict[str, Any] = documents()[("Deployment", "pier-gateway")]["spec"]["template"]["spec"]
    return spec


def container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [c for c in pod["containers"] if c["name"] == name]
    return found


def gateway_args() -> Any:
    gateway = container(gateway_pod(), "gateway")
    assert gateway["command"] == ["python", "-m", "pier.gateway"]
    return arguments().parse_args([str(a) for a in gateway["args"]])


def environment(of: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in of.get("env", [])}


def ray_yaml() -> RayConfig:
    return RayConfig.model_validate(yaml.safe_load(only("ConfigMap")["data"]["ray.yaml"]))


def memory_bytes(quantity: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([KMG]i?)?", quantity).groups()  # type: ignore[union-attr]
    return int(number) * UNITS.get(unit or "", 1)


def images() -> list[str]:
    head = cluster()["spec"]["headGroupSpec"]["template"]["spec"]["containers"]
    workers = [c for g in cluster()["spec"]["workerGroupSpecs"] for c in g["template"]["spec"]["containers"]]
    gateway = gateway_pod().get("initContainers", []) + gateway_pod()["containers"]
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
    mounts = {m["name"]: m["mountPath"] for m in container(gateway_pod(), "gateway")["volumeMounts"]}
    assert args.ray_config == Path(mounts["ray-config"]) / "ray.yaml"
    assert str(args.state_dir) == mounts["state"]
    volumes = {v["name"]: v for v in gateway_pod()["volumes"]}
    assert "emptyDir" in volumes["state"]  # the pod's own: the state is the database's, a pod keeps none
    assert volumes["ray-config"]["configMap"]["name"] == only("ConfigMap")["metadata"]["name"]


def test_the_gateway_s_driver_hangs_off_a_raylet_of_its_pod_not_off_the_head_s() -> None:
    """A Ray driver exits when its raylet does: attached to the head's, the gateway would go down with the head.
    Its pod runs a raylet that offers nothing (no instance lands there), whose processes and session files the
    gateway's container sees, and both wait longer for a GCS that is away than a head takes to restart."""
    pod, args = gateway_pod(), gateway_args()
    raylet = container(pod, "raylet")
    command = [str(c) for c in raylet["command"]]
    assert command[:3] == ["ray", "start", "--block"]
    assert command[command.index("--address") + 1] == args.ray_address
    assert command[command.index("--num-cpus") + 1] == "0" and command[command.index("--num-gpus") + 1] == "0"
    assert "--head" not in command and "--resources" not in command  # no instance type maps to this node
    assert pod["shareProcessNamespace"] is True  # Ray finds the local raylet among the processes it sees
    mounts = [{m["name"]: m["mountPath"] for m in c["volumeMounts"]} for c in (raylet, container(pod, "gateway"))]
    assert mounts[0]["ray"] == mounts[1]["ray"] == "/tmp/ray"
    for each in (raylet, container(pod, "gateway")):
        assert int(environment(each)["RAY_gcs_rpc_server_reconnect_timeout_s"]) >= 300, each["name"]


def test_the_head_keeps_its_gcs_in_the_manifest_s_redis_with_the_secret_s_password() -> None:
    options = cluster()["spec"]["gcsFaultToleranceOptions"]
    redis = documents()[("Service", "pier-redis")]
    host, port = options["redisAddress"].split(":")
    assert host == redis["metadata"]["name"] and int(port) == redis["spec"]["ports"][0]["port"]
    deployment = documents()[("Deployment", "pier-redis")]
    assert redis["spec"]["selector"] == deployment["spec"]["template"]["metadata"]["labels"]
    secret = options["redisPassword"]["valueFrom"]["secretKeyRef"]
    server = deployment["spec"]["template"]["spec"]["containers"][0]
    assert environment(server)["REDIS_PASSWORD"]["secretKeyRef"] == secret  # the one password on both sides
    script = " ".join(server["command"])
    assert '--requirepass "$REDIS_PASSWORD"' in script and "--appendonly yes" in script
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    claim = volumes["data"]["persistentVolumeClaim"]["claimName"]
    assert ("PersistentVolumeClaim", claim) in documents()  # its append-only file outlives the pod
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"


def test_the_gateways_keep_their_state_and_keys_in_the_database_named_by_a_secret() -> None:
    args = gateway_args()
    assert args.host == "0.0.0.0" and not args.insecure and args.state_url is None  # PIER_STATE_URL, below
    url = environment(container(gateway_pod(), "gateway"))["PIER_STATE_URL"]
    assert url["secretKeyRef"] == {"name": "pier-state", "key": "url"}  # never in the manifest itself
    assert "initContainers" not in gateway_pod()  # no keys.json: a gateway on a database reads the database's
    assert not [d for d in documents() if d[0] == "Secret"]  # made with kubectl, never kept in the repository


def test_the_service_reaches_the_gateway_and_the_gateway_answers_to_its_name() -> None:
    args = gateway_args()
    service = documents()[("Service", "pier-gateway")]
    deployment = documents()[("Deployment", "pier-gateway")]
    assert service["spec"]["selector"] == deployment["spec"]["template"]["metadata"]["labels"]
    assert service["metadata"]["name"] in args.allow_host  # in-cluster clients send Host: pier-gateway
    port = container(gateway_pod(), "gateway")["ports"][0]
    assert port["containerPort"] == args.port and service["spec"]["ports"][0]["targetPort"] == port["name"]
    assert container(gateway_pod(), "gateway")["readinessProbe"]["httpGet"] == {"path": "/ping", "port": "http"}


def test_two_gateways_one_always_serving_and_each_drains_before_kubernetes_kills_it() -> None:
    deployment = documents()[("Deployment", "pier-gateway")]
    assert deployment["spec"]["replicas"] == 2  # several gateways on one database (docs/state.md)
    rolling = deployment["spec"]["strategy"]
    assert rolling["type"] == "RollingUpdate" and rolling["rollingUpdate"]["maxUnavailable"] == 0
    assert gateway_pod()["terminationGracePeriodSeconds"] > gateway_args().grace_period
    spread = gateway_pod()["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert spread["podAffinityTerm"]["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


def test_the_ray_configuration_loads_as_the_gateway_loads_it(tmp_path: Path) -> None:
    path = tmp_path / "ray.yaml"
    path.write_text(only("ConfigMap")["data"]["ray.yaml"])
    config = RayConfig.load(path, address=gateway_args().ray_address)
    assert not config.own_cluster and config.capacity_wait_s >= 300  # room for the autoscaler to add a pod
