"""A Ray cluster of several nodes on this machine (`ray.cluster_utils.Cluster`), for the ray backend's tests.

Every node is a raylet of its own with a few logical CPUs; they all share this host's cores, so instances are
scaled down (`cpus_per_vcpu`) to fit. Ray is quiet (warnings only, no dashboard, small object stores), notices a
dead node within seconds, and this process joins the cluster as a driver in pier's namespace.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.server.processes import SRC

NODE_CPUS = 2  # logical: an ml.c7g.xlarge at cpus_per_vcpu 0.25 takes 1, so two instances fit a node
OBJECT_STORE = 80 * 2**20
SYSTEM = {
    "health_check_period_ms": 1000, "health_check_timeout_ms": 1000, "health_check_failure_threshold": 3,
    "prestart_worker_first_driver": False,
}


def node_args(**extra: Any) -> dict[str, Any]:
    return {"num_cpus": NODE_CPUS, "object_store_memory": OBJECT_STORE, **extra}


@contextmanager
def ray_cluster(workers: int = 2, cpus: int = NODE_CPUS, client_port: int | None = None) -> Iterator[Any]:
    """A head and `workers` worker nodes of `cpus` logical CPUs each; this process is connected to it; everything
    is gone afterwards. With `client_port`, the head also serves Ray Client (`ray://127.0.0.1:<client_port>`),
    whose per-client servers need the head's runtime-env agent, which comes with its dashboard processes."""
    ray = pytest.importorskip("ray", reason="the ray backend's tests need Ray (pip install 'pier[ray]')")
    from ray.cluster_utils import Cluster

    saved = {name: os.environ.get(name) for name in ("PYTHONPATH", "OMP_WAIT_POLICY")}
    # Nodes start their workers with this environment: pier importable from any folder, and model servers that
    # do not spin-wait on the cores the tests share.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, saved["PYTHONPATH"]) if p)
    os.environ["OMP_WAIT_POLICY"] = "passive"
    head = ({"ray_client_server_port": client_port} if client_port is not None
            else {"include_dashboard": False})
    cluster = Cluster(initialize_head=True, head_node_args=node_args(num_cpus=cpus, _system_config=SYSTEM, **head))
    try:
        for _ in range(workers):
            cluster.add_node(**node_args(num_cpus=cpus))
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, namespace="pier", logging_level=logging.WARNING, log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def node_ids() -> set[str]:
    import ray

    return {n["NodeID"] for n in ray.nodes() if n["Alive"]}


def copy_actors() -> list[str]:
    """pier's copy actors alive in its namespace."""
    import ray

    return sorted(n for n in ray.util.list_named_actors() if n.startswith("pier-copy-"))


def instance_groups() -> list[str]:
    """pier's placement groups that are not removed."""
    from ray.util import placement_group_table

    return sorted(e["name"] for e in placement_group_table().values()
                  if e["name"].startswith("pier-instance-") and e["state"] != "REMOVED")


def lose_node(cluster: Any, node_id: str) -> None:
    """The worker node with this id gone as a machine goes: its raylet and every process under it (its actors and
    the model servers they started) killed together. `remove_node` alone kills Ray's own processes and leaves the
    actors to notice within about a second, in which a short answer can still finish."""
    import psutil
    from ray._private import ray_constants

    node = worker_of(cluster, node_id)
    raylet = psutil.Process(node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid)
    under = raylet.children(recursive=True)
    cluster.remove_node(node, allow_graceful=False)
    for process in under:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()


def worker_of(cluster: Any, node_id: str) -> Any:
    """The cluster_utils node (a worker, never the head) with this id."""
    for node in cluster.worker_nodes:
        if node.node_id == node_id:
            return node
    raise AssertionError(f"no worker node {node_id}")
