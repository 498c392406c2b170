"""The ray backend's extra hop: the same copy served through the gateway on the local backend, and on a Ray node
other than the gateway's, measured interleaved by one client (pier bench's `run_bench`).

    python benchmarks/ray_hop.py                         # c = 1 and 4, 3 repeats: ~10 min on 2 cores
    python benchmarks/ray_hop.py --repeats 5 --levels 1,4,8 --out ray-hop.md

A Ray cluster of two nodes runs on this machine (`ray.cluster_utils.Cluster`): a head, which the gateway joins,
and a worker with a custom resource `copy_node`, to which the instance type `local` is mapped, so the copy runs
there. Two gateways serve one endpoint of one copy each, the same model and environment, 2 threads pinned to the
same cores: `python -m pier.gateway` (local backend) and `python -m pier.gateway --backend ray --ray-address HEAD
--ray-config ray.yaml`. Both are up for the whole run, idle while the other is measured. Requests go through each
gateway's /v1/completions (model = the endpoint); the gateway reaches the ray copy at its node's address.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

from common import bench_model, log, raise_on_sigterm
from measure import Arm, Measurer, Runs, Shape
from peers import ENDPOINT, Catalog, Fleet, Server, completions, deploy_endpoint, running
from report import TOKS, Check, Section, paired, ranged, ratio, render_report

RAY_CONFIG = """\
cpus_per_vcpu: 0
memory: false
instance_types:
  local: {{resources: {{copy_node: 1}}}}   # the endpoint's instance: the worker node, whole
node_dir: {node_dir}
keep_copies: false                      # the copies end with their gateway, as local ones do
"""


def ray_cluster() -> object:
    import ray
    from ray.cluster_utils import Cluster

    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).parents[1] / "src"),
                                                           os.environ.get("PYTHONPATH")) if p)
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "object_store_memory": 100 * 2**20})
    cluster.add_node(num_cpus=2, resources={"copy_node": 1}, object_store_memory=100 * 2**20)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="pier", logging_level=logging.WARNING, log_to_driver=False)
    return cluster


def copy_node(cluster: object) -> str:
    import ray

    actors = [n for n in ray.util.list_named_actors() if n.startswith("pier-copy-")]
    identity = ray.get(ray.get_actor(actors[0]).identity.remote(), timeout=30)
    head = cluster.head_node.node_id  # type: ignore[attr-defined]
    where = "a worker node" if identity.node_id != head else "the head node (the gateway's)"
    return f"the ray copy runs on {where} ({identity.node_id[:12]}), at {identity.address}"


CpuRuns = dict[tuple[str, int, str], list[float]]  # (arm, concurrency, process) -> CPU ms per 1000 output tokens


def cpu_ms(pid: int) -> float:
    """CPU time (user + system) the process has used so far, in ms; its children are not counted."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def interleaved(measurer: Measurer, arms: list[Arm], processes: dict[str, dict[str, int]], shape: Shape,
                levels: list[int]) -> tuple[Runs, CpuRuns]:
    """As Measurer.interleaved (a warm-up per arm, then repeat 1 of every arm, repeat 2, ...), and the CPU each
    process of the arm (gateway, copy, the copy's actor) spent per 1000 output tokens: CPU time barely depends on
    how busy the machine is, so it shows the hop's cost where throughput drowns in the machine's noise."""
    for arm in arms:
        measurer.once(arm, shape, min(4, max(levels)), 4, seed=10_000)
    runs: Runs = {}
    cpu: CpuRuns = {}
    for c in levels:
        for repeat in range(measurer.repeats):
            for arm in arms:
                before = {name: cpu_ms(pid) for name, pid in processes[arm.label].items()}
                metrics = measurer.once(arm, shape, c, max(measurer.requests, 2 * c), seed=repeat)
                tokens = max(1, metrics.total_output_tokens)
                for name, pid in processes[arm.label].items():
                    cpu.setdefault((arm.label, c, name), []).append((cpu_ms(pid) - before[name]) * 1000 / tokens)
                runs.setdefault((arm.label, c), []).append(metrics)
                log(f"c={c} #{repeat + 1} {arm.label}: {metrics.output_throughput:.1f} tok/s, "
                    f"{metrics.completed}/{metrics.started} ok")
    return runs, cpu


def cpu_table(cpu: CpuRuns, arms: list[Arm], levels: list[int]) -> list[str]:
    names = ("gateway", "copy", "copy's actor")
    lines = ["## CPU per 1000 output tokens", "",
             "CPU time (user + system) each process spent during a run, per 1000 output tokens: median (min–max) "
             "over repeats, in ms. The copy's actor (ray only) keeps its model server alive and reports to the "
             "gateway; the gateway relays the stream.", "",
             "| c | server | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for c in levels:
        for arm in arms:
            cells = [ranged(cpu[(arm.label, c, n)]) if (arm.label, c, n) in cpu else "–" for n in names]
            lines.append(f"| {c} | {arm.label} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def actor_pid() -> int:
    import ray

    actors = [n for n in ray.util.list_named_actors() if n.startswith("pier-copy-")]
    pid: int = ray.get(ray.get_actor(actors[0]).identity.remote(), timeout=30).pid
    return pid


def run(args: argparse.Namespace) -> None:
    started = time.monotonic()
    model = Path(args.model) if args.model else bench_model()
    measurer = Measurer(model, args.requests, args.repeats)
    catalog = Catalog(model, None)
    shape = Shape(output_len=args.output_len)
    sections: list[Section] = []
    cluster = ray_cluster()
    try:
        with tempfile.TemporaryDirectory(prefix="pier-ray-hop-") as scratch:
            folder = Path(scratch)
            logs = Path(args.logs) if args.logs else folder / "logs"
            logs.mkdir(parents=True, exist_ok=True)
            fleet = Fleet(logs)
            config = folder / "ray.yaml"
            config.write_text(RAY_CONFIG.format(node_dir=folder / "nodes"))
            local = catalog.gateway("local backend", folder / "local")
            plain = catalog.gateway("ray backend", folder / "ray")
            address = cluster.address  # type: ignore[attr-defined]
            on_ray = Server(plain.label, (*plain.argv, "--backend", "ray", "--ray-address", address, "--ray-config",
                                          str(config)), plain.port, plain.ready_path)
            with running(fleet, [local, on_ray]):
                commands = [local.shown(), on_ray.shown()]
                processes: dict[str, dict[str, int]] = {}
                for gateway in (local, on_ray):
                    url, command = deploy_endpoint(gateway, model, fleet)
                    log(f"{gateway.label}: endpoint {ENDPOINT} in service, its copy at {url}")
                    commands.append(f"# {gateway.label}: the copy runs\n{command}")
                    processes[gateway.label] = {"gateway": fleet.processes[gateway.label].pid,
                                                "copy": fleet.extra_pids[-1]}
                processes[on_ray.label]["copy's actor"] = actor_pid()
                where = copy_node(cluster)
                log(where)
                arms = [Arm(local.label, completions(local), model=ENDPOINT),
                        Arm(on_ray.label, completions(on_ray), model=ENDPOINT)]
                runs, cpu = interleaved(measurer, arms, processes, shape, args.levels)
            checks = []
            for c in args.levels:
                toks = ratio(runs, on_ray.label, local.label, c, TOKS)
                pairs = ", ".join(f"{p:.3f}" for p in paired(runs, on_ray.label, local.label, c, TOKS))
                checks.append(Check(f"c={c}: output tok/s on a ray node ≥ 0.95x the local backend's",
                                    f"{toks:.3f}x (per repeat {pairs})", toks >= 0.95))
            sections.append(Section(
                "The ray backend's extra hop: one copy on another Ray node vs the local backend",
                "The same endpoint (one copy, 2 threads, prefix cache off) on two gateways: the local backend, and "
                "the ray backend with the copy on a worker node of a two-node Ray cluster on this machine. "
                f"Requests through each gateway's `/v1/completions`; {where}.",
                commands, arms, args.levels, shape, runs, [(on_ray.label, local.label)], checks,
                seconds=time.monotonic() - started))
            fleet.stop_all()
    finally:
        import ray

        ray.shutdown()
        cluster.shutdown()  # type: ignore[attr-defined]
    text = render_report(args, model, sections, measurer.problems, time.monotonic() - started, True)
    text = text.replace("# pier vs llama-server and llama-cpp-python's server", "# pier on Ray: the extra hop", 1)
    text += "\n" + "\n".join(cpu_table(cpu, arms, args.levels))
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="GGUF to serve (default: the 360M-class Q4_0 model, built once)")
    parser.add_argument("--requests", type=int, default=16, help="requests per run (at least 2 per user)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--levels", default="1,4", help="concurrency levels")
    parser.add_argument("--output-len", type=int, default=64, help="output tokens per request")
    parser.add_argument("--out", help="also write the markdown report to this file")
    parser.add_argument("--logs", help="keep the gateways' logs in this folder (default: a temporary one)")
    args = parser.parse_args()
    args.levels = [int(level) for level in args.levels.split(",")]
    raise_on_sigterm()
    sys.exit(run(args))


if __name__ == "__main__":
    main()
