"""A Ray cluster of real processes with GCS fault tolerance, for the tests of a head that goes away: a Redis
server (Debian's `redis-server`, in a temporary folder, on a loopback port) that the head's GCS keeps its tables
in, a head started with `ray start --head` on it (no CPUs: no copies there, as in deploy/kuberay), and worker
nodes started with `ray start --address`. The GCS can then be killed and started again with its own command line,
or the whole head node killed and started again with `ray start --head`, as a KubeRay head pod restarts;
`.ci/run` installs redis-server where missing, and these tests skip,
saying how to install it, where it is absent."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from tests.server.processes import SRC
from tests.sockets import free_port

MISSING = ("redis-server is not installed: install Debian's package (apt-get install -y redis-server), as .ci/run "
           "does, to run the GCS fault tolerance tests")
NAMESPACE = "pier-test"  # RAY_external_storage_namespace: the key prefix of this cluster's tables in Redis
RECONNECT_S = 120  # RAY_gcs_rpc_server_reconnect_timeout_s: how long a raylet or driver waits for a GCS that is away


def available() -> bool:
    return shutil.which("redis-server") is not None and shutil.which("ray") is not None


class RedisServer:
    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(folder),
             "--save", "", "--appendonly", "no"], stdout=(folder / "redis.log").open("wb"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True,
                             text=True).stdout.strip() != "PONG":
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"redis-server did not start; see {folder / 'redis.log'}")
            time.sleep(0.1)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stored(self) -> list[str]:
        out = subprocess.run(["redis-cli", "-p", str(self.port), "--scan"], capture_output=True, text=True).stdout
        return out.split()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


class RayHead:
    """The cluster, as processes: everything it started is found by the GCS port on its command line."""

    def __init__(self, workers: int = 1, worker_cpus: int = 2, worker_ip: str | None = None) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="pier-gcs-"))
        self.redis = RedisServer(self.folder)
        self.port = free_port()
        self.environment = {
            **os.environ, "RAY_REDIS_ADDRESS": self.redis.address, "RAY_external_storage_namespace": NAMESPACE,
            "RAY_gcs_rpc_server_reconnect_timeout_s": str(RECONNECT_S),
            # Nodes start their workers with this environment: pier importable from any folder, and model servers
            # that do not spin-wait on the cores the tests share.
            "PYTHONPATH": os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH")) if p),
            "OMP_WAIT_POLICY": "passive", "RAY_USAGE_STATS_ENABLED": "0",
        }
        self._gcs: tuple[list[str], str, dict[str, str]] | None = None
        # A worker with an address of its own (127.0.0.2: Linux answers on all of 127/8) is a node a driver can
        # pick on this one host, and its processes are told from the head's by that address on their command line.
        self.worker_ip = worker_ip
        # Ray's files in a folder of this cluster's own, not the host's shared /tmp/ray: the head's restart below
        # clears the address `ray start` left there, as a restarted head pod's fresh filesystem has none.
        self.temp_dir = self.folder / "ray"
        self._head = ("start", "--head", "--port", str(self.port), "--num-cpus", "0", "--include-dashboard", "false",
                      "--temp-dir", str(self.temp_dir))
        try:
            self._ray(*self._head)
            where = ("--node-ip-address", worker_ip) if worker_ip else ()
            for _ in range(workers):
                self._ray("start", "--address", self.address, "--num-cpus", str(worker_cpus), *where)
        except BaseException:
            self.stop()
            raise

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def gcs(self) -> psutil.Process | None:
        for process in psutil.process_iter(["name", "cmdline"]):
            line = " ".join(process.info["cmdline"] or [])
            if process.info["name"] == "gcs_server" and f"--gcs_server_port={self.port}" in line:
                return process
        return None

    def kill_gcs(self) -> None:
        """kill -9 of the head's GCS; its command line kept, to start it again as the head's restart would."""
        gcs = self.gcs()
        assert gcs is not None, "the head's GCS is not running"
        self._gcs = (gcs.cmdline(), gcs.cwd(), gcs.environ())
        gcs.kill()
        gcs.wait(10)

    def start_gcs(self) -> None:
        assert self._gcs is not None, "kill_gcs() first"
        argv, cwd, environment = self._gcs
        log = (self.folder / "gcs_server.restarted.log").open("ab")
        subprocess.Popen(argv, cwd=cwd, env=environment, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def head_node(self) -> list[psutil.Process]:
        """Every process of the head node, as a KubeRay head pod holds them: its GCS, raylet (with the agents and
        workers it started), dashboard, autoscaler monitor, log monitor and Ray Client server; none of a worker's."""
        assert self.worker_ip, "start the workers with an address of their own (worker_ip) to tell them apart"
        roots = [p for p in psutil.process_iter(["cmdline"])
                 if self._ours(p.info["cmdline"] or []) and not any(self.worker_ip in arg
                                                                    for arg in p.info["cmdline"] or [])]
        found = {p.pid: p for root in roots for p in (root, *_descendants(root))}
        return list(found.values())

    def kill_head(self) -> list[str]:
        """kill -9 of the whole head node at once, as a head pod's restart does; the names of what was killed."""
        processes = self.head_node()
        names = sorted(_name(p) for p in processes)
        for process in processes:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(processes, timeout=10)
        return names

    def start_head(self) -> None:
        """The head again, with its first command line and environment: the same port, Redis and namespace.
        `ray start --head` refuses a port that the address it last wrote names while a raylet on this host still
        uses it (the worker's, here; a head pod sees no other pod's processes), so that address goes first."""
        (self.temp_dir / "ray_current_cluster").unlink(missing_ok=True)
        self._ray(*self._head)

    def _ours(self, argv: list[str]) -> bool:
        """A Ray process of this cluster: it names the GCS port in an option of its own (`--gcs-address=...:PORT`),
        unlike a gateway, whose `--ray-address` takes it as a separate argument and which outlives the head."""
        return any(arg == f"--gcs_server_port={self.port}" or ("=" in arg and arg.endswith(f":{self.port}"))
                   for arg in argv)

    def stop(self) -> None:
        """Every process of this cluster (found by its GCS port: never another test's Ray), then Redis."""
        def ours(argv: list[str]) -> bool:
            return any(arg.endswith(f":{self.port}") or arg == f"--gcs_server_port={self.port}" for arg in argv)

        mine = [p for p in psutil.process_iter(["cmdline"]) if ours(p.info["cmdline"] or [])]
        for process in mine:
            with contextlib.suppress(psutil.Error):
                process.kill()
        self.redis.stop()

    def _ray(self, *args: str) -> None:
        ray = Path(sys.executable).with_name("ray")
        command = [str(ray) if ray.exists() else "ray", *args, "--disable-usage-stats"]
        done = subprocess.run(command, env=self.environment, capture_output=True, text=True, timeout=180)
        if done.returncode:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")

    def __enter__(self) -> RayHead:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _descendants(process: psutil.Process) -> list[psutil.Process]:
    try:
        return process.children(recursive=True)
    except psutil.Error:
        return []


def _name(process: psutil.Process) -> str:
    try:
        return process.name()
    except psutil.Error:
        return "?"
