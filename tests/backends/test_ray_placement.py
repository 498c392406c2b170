"""The ray backend's decisions, without Ray: bundles, spreading, missing capacity, cores, its configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from pier.backends.base import CopySpec, Instance
from pier.backends.ray.config import ConfigError, RayConfig, TypeMapping
from pier.backends.ray.placement import (
    MIB,
    Node,
    choose_node,
    instance_index,
    missing_capacity,
    node_cores,
    reservation,
)

C7G_XL = Instance("e/AllTraffic", 0, "ml.c7g.xlarge", 4, 8192, 0, (0, 1, 2, 3))
G5_12XL = Instance("llm/AllTraffic", 0, "ml.g5.12xlarge", 48, 196608, 4, (0, 1, 2, 3))


def spec(instance: Instance | None, copy_id: str = "c-0", **fields: object) -> CopySpec:
    return CopySpec(copy_id, "c", Path("/m"), instance=instance, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "instance", "config", "bundle"), [
    ("a real instance: its vCPUs and memory", C7G_XL, RayConfig(), {"CPU": 4, "memory": 8192 * MIB}),
    ("accelerators are GPUs", G5_12XL, RayConfig(memory=False), {"CPU": 48, "GPU": 4}),
    ("the gateway's host as one instance: its cores only (no node gives Ray all its memory)",
     Instance("e/v", 0, "local", 2, 24000, 0, (0, 1)), RayConfig(), {"CPU": 2}),
    ("scaled for small test nodes", C7G_XL, RayConfig(cpus_per_vcpu=0.25, memory=False), {"CPU": 1}),
    ("a custom resource on every bundle", C7G_XL, RayConfig(cpus_per_vcpu=0, memory=False,
                                                            resources={"pier_instance": 1}), {"pier_instance": 1}),
    ("a type mapped to what the nodes have", C7G_XL,
     RayConfig(instance_types={"ml.c7g.xlarge": TypeMapping(resources={"graviton": 1, "CPU": 2})},
               resources={"pier": 1}), {"graviton": 1, "CPU": 2, "pier": 1}),
    ("other types keep the default sizing", G5_12XL,
     RayConfig(instance_types={"ml.c7g.xlarge": TypeMapping(resources={"graviton": 1})}, memory=False),
     {"CPU": 48, "GPU": 4}),
    ("everything configured away still asks Ray for something", C7G_XL, RayConfig(cpus_per_vcpu=0, memory=False),
     {"CPU": 0.01}),
])
def test_an_instance_reserves_a_bundle_sized_by_its_type(name: str, instance: Instance, config: RayConfig,
                                                         bundle: dict[str, float]) -> None:
    assert dict(reservation(spec(instance), config).bundle) == bundle, name


def test_copies_of_one_instance_share_its_group_and_instances_do_not() -> None:
    config = RayConfig()
    first, second = reservation(spec(C7G_XL, "a-0"), config), reservation(spec(C7G_XL, "b-0"), config)
    assert first.group == second.group and first.group.startswith("pier-instance-e-alltraffic-0-")
    other = reservation(spec(Instance("e/AllTraffic", 1, "ml.c7g.xlarge", 4, 8192)), config)
    assert other.group != first.group
    resized = reservation(spec(C7G_XL), RayConfig(cpus_per_vcpu=0.5))
    assert resized.group != first.group  # another bundle is another placement group
    labelled = reservation(spec(C7G_XL), RayConfig(instance_types={"ml.c7g.xlarge": TypeMapping(
        labels={"pier.io/pool": "graviton"})}))
    assert dict(labelled.labels) == {"pier.io/pool": "graviton"}
    assert "on a node labelled {'pier.io/pool': 'graviton'}" in labelled.describe()


def test_a_copy_placed_by_no_variant_is_an_instance_of_its_own_size() -> None:
    wanted = reservation(spec(None, "solo-1", cores=(0, 1), memory_mb=512), RayConfig())
    assert wanted.group == "pier-instance-copy-solo-1"
    assert dict(wanted.bundle) == {"CPU": 2, "memory": 512 * MIB}


def node(node_id: str, cpus: float = 2, alive: bool = True, **labels: str) -> Node:
    return Node(node_id, "10.0.0.1", alive, {"CPU": cpus, "memory": 64 * 1024 * MIB}, labels)


ONE_CPU = reservation(spec(C7G_XL), RayConfig(cpus_per_vcpu=0.25, memory=False))


@pytest.mark.parametrize(("name", "nodes", "same", "ours", "chosen"), [
    ("the node with fewest instances of the variant", [node("a"), node("b")], {"a": 1}, {"a": 1}, "b"),
    ("then the one with fewest of pier's", [node("a"), node("b"), node("c")], {"a": 1}, {"a": 1, "b": 2}, "c"),
    ("ties by node id", [node("b"), node("a")], {}, {}, "a"),
    ("never a dead node", [node("a", alive=False), node("b")], {"b": 3}, {"b": 3}, "b"),
    ("never a node too small for the bundle", [node("a", cpus=0.5), node("b")], {"b": 1}, {"b": 1}, "b"),
    ("no node could hold it", [node("a", cpus=0.5)], {}, {}, None),
])
def test_instances_spread_over_nodes(name: str, nodes: list[Node], same: dict[str, int], ours: dict[str, int],
                                     chosen: str | None) -> None:
    assert choose_node(ONE_CPU, nodes, same, ours) == chosen, name


def test_labels_choose_the_nodes_an_instance_may_go_to() -> None:
    wanted = reservation(spec(C7G_XL), RayConfig(cpus_per_vcpu=0.25, memory=False, instance_types={
        "ml.c7g.xlarge": TypeMapping(labels={"pool": "graviton"})}))
    nodes = [node("a"), node("b", pool="graviton"), node("c", pool="x86")]
    assert choose_node(wanted, nodes, {"b": 5}, {"b": 5}) == "b"


@pytest.mark.parametrize(("nodes", "words"), [
    ([node("a", cpus=0.5), node("b", cpus=0.25)],
     "needs 1 CPU, more than any of the cluster's 2 live node(s) has (the closest has 0.5 CPU)"),
    ([node("a")], "needs 1 CPU; the nodes that could hold it are busy with other instances"),
    ([node("a", alive=False)], "the Ray cluster has no live node"),
])
def test_missing_capacity_is_said_in_words(nodes: list[Node], words: str) -> None:
    message = missing_capacity(ONE_CPU, nodes, C7G_XL)
    assert message.startswith("Waiting for capacity: instance 0 of e/AllTraffic (ml.c7g.xlarge)")
    assert words in message and "A Ray autoscaler adds such nodes" in message


@pytest.mark.parametrize(("index", "owned", "cores", "expected"), [
    (0, (0, 1, 2, 3), (0, 1, 2, 3, 4, 5, 6, 7), (0, 1, 2, 3)),
    (1, (0, 1, 2, 3), (0, 1, 2, 3, 4, 5, 6, 7), (4, 5, 6, 7)),
    (0, (2,), (0, 1, 2, 3, 4, 5, 6, 7), (2,)),
    (1, (0, 1, 2, 3), (0, 1), (0, 1)),  # an instance bigger than the node shares its cores
    (0, (), (8, 9, 10, 11), (8, 9, 10, 11)),  # owning none: the whole instance
    (0, (0,), (), ()),
])
def test_copies_run_on_their_instances_cores_of_the_node(index: int, owned: tuple[int, ...], cores: tuple[int, ...],
                                                          expected: tuple[int, ...]) -> None:
    instance = Instance("e/v", 0, "ml.c7g.xlarge", 4, 8192, 0, owned)
    assert node_cores(index, instance, cores) == expected


def test_an_instance_index_counts_pier_instances_on_its_node() -> None:
    placed = {"g-b": "n1", "g-a": "n1", "g-c": "n2"}
    assert [instance_index(g, "n1", placed) for g in ("g-a", "g-b")] == [0, 1]
    assert instance_index("g-c", "n2", placed) == 0
    assert instance_index("g-new", "n1", placed) == 2


def test_config_from_a_file_with_options_on_top(tmp_path: Path) -> None:
    path = tmp_path / "ray.yaml"
    path.write_text("address: auto\nnamespace: team-a\ncpus_per_vcpu: 0.5\ninstance_types:\n"
                    "  ml.c7g.xlarge:\n    resources: {graviton: 1}\n    labels: {pool: arm}\n")
    config = RayConfig.load(path, address="ray://head:10001", cpus_per_vcpu=None)
    assert config.address == "ray://head:10001" and config.namespace == "team-a" and config.cpus_per_vcpu == 0.5
    assert config.instance_types["ml.c7g.xlarge"].labels == {"pool": "arm"}
    assert config.keeps_copies(started_ray=False) and not config.keeps_copies(started_ray=True)
    assert RayConfig(keep_copies=False).keeps_copies(started_ray=False) is False


@pytest.mark.parametrize(("text", "words"), [
    ("cpus_per_vcpu: -1\n", "cpus_per_vcpu: Input should be greater than or equal to 0"),
    ("adress: auto\n", "adress: Extra inputs are not permitted"),
    ("namespace: 'a b'\n", "namespace: Value error, use letters, digits"),
    ("- 1\n", "must hold a mapping"),
    ("instance_types: {ml.c7g.xlarge: {resources: {CPU: 0}}}\n", "instance_types.ml.c7g.xlarge.resources.CPU"),
])
def test_a_bad_config_names_the_key(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "ray.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        RayConfig.load(path)
    assert words in str(raised.value)


def test_copies_on_ray_do_not_depend_on_the_gateways_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    from pier.backends.ray import RayBackend
    from pier.gateway.app import create_gateway

    monkeypatch.delenv("PIER_MAX_COPIES_PER_HOST", raising=False)
    backend = RayBackend(tmp_path / "state")  # not connected: nothing here touches Ray
    app = create_gateway(tmp_path / "state", backend=backend)
    gateway = app.state.gateway
    assert gateway.reconciler.host == tuple(range(256))
    # Nor does this host's size cap them: the cluster's capacity does (or PIER_MAX_COPIES_PER_HOST).
    assert gateway.reconciler.copy_cap.copies == gateway.control.copy_cap.copies == 1024
    gateway.state.close()
