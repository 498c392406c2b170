"""Several gateways on one state database (issue 40): what PostgreSQL costs against SQLite, what a second gateway
buys, and how long a follower takes to lead when the leader is killed.

Every gateway is `pier up` itself (`python -m pier.gateway`'s main), whose local backend starts relay_ceiling's fake
copy (one token per answer) in place of the model server: no model is needed, and everything else (control plane,
reconciler, leadership, copy board, router, relay) is the real gateway's. Endpoint `relay` has one copy.

(a) latency, one gateway, on SQLite (its state folder) and then on PostgreSQL: one client, one call at a time,
    `--calls` of each through boto3: DescribeEndpoint, ListEndpoints, CreateModel + DeleteModel (one sample), and
    InvokeEndpoint (the runtime: it reads the endpoint's record on every call); p50/p99.
(b) requests per second on PostgreSQL through one gateway, then through two (`--clients` concurrent clients,
    client i on gateway i % 2; the second gateway follows and routes by the leader's copy board): DescribeEndpoint
    and InvokeEndpoint as raw HTTP (httpx; the gateways have no keys and listen on loopback, so nothing is signed),
    with the CPU seconds each process used, to show what bounds the figure.
(c) takeover: two gateways on a fresh database; `--kills` times: kill -9 the leader (at a random moment, 0-2 s
    after the other follows) and time until the other's GET /pier says `leader` (polled every 20 ms); the killed
    gateway is started again and follows.

    PYTHONPATH=src python3 benchmarks/state_url.py --calls 200 --clients 16 --seconds 10 --kills 10

It starts a PostgreSQL of its own in a temporary folder (tests/postgres.py: Debian's `postgresql` package; a new
database for each part), fsync off as in the tests: the figures are pier's and PostgreSQL's CPU, not a disk's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from common import free_port, log
from relay_ceiling import byoc_model, cpu_seconds, deploy, percentile

REPO = Path(__file__).resolve().parents[1]
ENDPOINT = "relay"
POLL_S = 0.02
HOST_BUSY = "host busy"


# -- the pure parts -------------------------------------------------------------------------------------------


def summary(seconds: Sequence[float]) -> dict[str, float | int]:
    """p50 and p99 of call times, in milliseconds."""
    return {"calls": len(seconds), "p50_ms": round(percentile(seconds, 0.5) * 1e3, 2),
            "p99_ms": round(percentile(seconds, 0.99) * 1e3, 2)}


def spread(clients: int, urls: Sequence[str]) -> list[str]:
    """The gateway each client calls: round robin, so each gateway gets an equal share (±1)."""
    return [urls[i % len(urls)] for i in range(clients)]


def takeover(seconds: Sequence[float]) -> dict[str, float | int]:
    """From kill -9 of the leader to the follower leading, over every kill."""
    return {"kills": len(seconds), "p50_s": round(percentile(seconds, 0.5), 2),
            "max_s": round(max(seconds), 2) if seconds else float("nan")}


def leader_of(abouts: dict[str, dict[str, Any]]) -> str | None:
    """Which gateway (by URL) says it leads, given each one's GET /pier; None while none or several do."""
    leading = [url for url, about in abouts.items() if about.get("role") == "leader"]
    return leading[0] if len(leading) == 1 else None


def shares(cpu_s: dict[str, float], wall_s: float, cores: int) -> dict[str, float]:
    """Each part's CPU over the run as a share of the host's (cores x wall seconds); `host busy` (all of the host's
    processes) gives `others` (what is not the benchmark's: the rest of the machine's load) and `idle`."""
    host = cores * wall_s
    out = {name: round(used / host, 2) for name, used in cpu_s.items() if name != HOST_BUSY}
    if HOST_BUSY in cpu_s:
        ours = sum(used for name, used in cpu_s.items() if name != HOST_BUSY)
        out["others"] = round(max(0.0, cpu_s[HOST_BUSY] - ours) / host, 2)
        out["idle"] = round(max(0.0, 1 - cpu_s[HOST_BUSY] / host), 2)
    return out


def per_request(cpu_s: dict[str, float], requests: int) -> dict[str, float]:
    """Each part's CPU milliseconds per answered request (the gateways' together), and their sum: what one request
    costs the host, whatever else ran beside it; `cores x 1000 / total` is the most requests a second the host
    could answer with nothing else on it."""
    gateways = sum(used for name, used in cpu_s.items() if name.startswith("gateway"))
    parts = {"gateways": gateways, **{name: used for name, used in cpu_s.items()
                                      if not name.startswith("gateway") and name != HOST_BUSY}}
    out = {name: round(used * 1e3 / requests, 3) if requests else float("nan") for name, used in parts.items()}
    out["total"] = round(sum(out.values()), 3)
    return out


# -- the processes --------------------------------------------------------------------------------------------


def serve_pier_up(args: argparse.Namespace) -> int:
    """`pier up` with relay_ceiling's fake copy in place of the model server (one token per answer)."""
    import pier.backends.process
    from pier.gateway.run import main as gateway_main

    ceiling = str(Path(__file__).with_name("relay_ceiling.py"))

    def fake_copy(python: str, spec: Any, port: int) -> list[str]:
        return [python, ceiling, "--role", "copy", "--port", str(port), "--tokens", "1", "--concurrency", "64"]

    pier.backends.process.command = fake_copy
    state_url = ["--state-url", args.state_url] if args.state_url else []
    return gateway_main(["--port", str(args.port), "--state-dir", args.state_dir, "--log-level", "warning",
                         *state_url])


class Gateway:
    def __init__(self, state_dir: Path, state_url: str | None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--role", "pier-up", "--port", str(self.port), "--state-dir", str(state_dir),
             *(["--state-url", state_url] if state_url else [])], stdin=subprocess.DEVNULL)

    def about(self) -> dict[str, Any]:
        import httpx

        try:
            return httpx.get(self.url + "/pier", timeout=2).json()  # type: ignore[no-any-return]
        except (httpx.HTTPError, ValueError):
            return {}

    def cpu_s(self) -> float:
        return cpu_seconds(Path(f"/proc/{self.process.pid}/stat").read_text())

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(30)


def until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout_s} s")
        time.sleep(POLL_S)


@contextlib.contextmanager
def gateways(count: int, scratch: Path, state_url: str | None) -> Iterator[list[Gateway]]:
    started = [Gateway(scratch / f"state-{i}-{time.monotonic_ns()}", state_url) for i in range(count)]
    try:
        for gateway in started:
            until(lambda g=gateway: bool(g.about()), 60, f"{gateway.url} answering")
        if count > 1:
            until(lambda: leader_of({g.url: g.about() for g in started}) is not None and all(
                g.about().get("leader") for g in started), 60, "a leader that every gateway names")
        yield started
    finally:
        for gateway in started:
            gateway.stop()


@contextlib.contextmanager
def database() -> Iterator[Callable[[], str]]:
    """A PostgreSQL of its own, fsync off (tests/postgres.py); a new empty database's URL for each call of what it
    yields."""
    sys.path.insert(0, str(REPO))
    from tests.postgres import PostgresServer

    server = PostgresServer()
    try:
        yield server.database
    finally:
        server.stop()


def cpu_of(matches: Callable[[str, str], bool]) -> float:
    """The CPU seconds of every process whose (name, command line) `matches`."""
    total = 0.0
    for folder in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            text = (folder / "stat").read_text()
            command = (folder / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if matches(text.split("(", 1)[1].split(")", 1)[0], command):
                total += cpu_seconds(text)
    return total


def others_cpu() -> dict[str, float]:
    """What the processes beside the gateways use: PostgreSQL's (one backend per connection), the fake copies',
    and the whole host's busy CPU seconds (/proc/stat), so the rest of the machine's load shows too."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    busy = sum(int(f) for i, f in enumerate(fields[:8]) if i not in (3, 4)) / os.sysconf("SC_CLK_TCK")
    return {"postgres": cpu_of(lambda name, _: name == "postgres"),
            "copies": cpu_of(lambda _, command: "relay_ceiling.py --role copy" in command),
            HOST_BUSY: busy}


# -- (a) latency ----------------------------------------------------------------------------------------------


def clients(url: str) -> tuple[Any, Any]:
    import boto3
    from botocore.config import Config

    settings: dict[str, Any] = {"endpoint_url": url, "region_name": "us-east-1", "aws_access_key_id": "x",
                                "aws_secret_access_key": "x", "config": Config(retries={"max_attempts": 1})}
    return boto3.client("sagemaker", **settings), boto3.client("sagemaker-runtime", **settings)


def latency(url: str, model_dir: Path, calls: int) -> dict[str, Any]:
    control, runtime = clients(url)
    container = {"Image": "byoc", "ModelDataUrl": f"file://{model_dir}"}

    def create_delete(i: int) -> None:
        control.create_model(ModelName=f"bench-{i}", ExecutionRoleArn="arn:aws:iam::1:role/r",
                             PrimaryContainer=container)
        control.delete_model(ModelName=f"bench-{i}")

    operations: dict[str, Callable[[int], Any]] = {
        "DescribeEndpoint": lambda i: control.describe_endpoint(EndpointName=ENDPOINT),
        "ListEndpoints": lambda i: control.list_endpoints(),
        "CreateModel+DeleteModel": create_delete,
        "InvokeEndpoint": lambda i: runtime.invoke_endpoint(EndpointName=ENDPOINT, Body=b'{"inputs": "hi"}',
                                                            ContentType="application/json")["Body"].read(),
    }
    rows = {}
    for name, call in operations.items():
        for i in range(5):
            call(-1 - i)  # warm: connections, botocore's models
        times = []
        for i in range(calls):
            start = time.perf_counter()
            call(i)
            times.append(time.perf_counter() - start)
        rows[name] = summary(times)
        log(f"  {name}: {rows[name]}")
    return rows


# -- (b) requests per second ----------------------------------------------------------------------------------


REQUESTS = {
    "DescribeEndpoint": ("/", {"X-Amz-Target": "SageMaker.DescribeEndpoint",
                               "Content-Type": "application/x-amz-json-1.1"}, json.dumps({"EndpointName": ENDPOINT})),
    "InvokeEndpoint": (f"/endpoints/{ENDPOINT}/invocations", {"Content-Type": "application/json"},
                       '{"inputs": "hi"}'),
}


async def load(name: str, urls: Sequence[str], seconds: float) -> tuple[int, int]:
    """(answered 200, failed) by clients calling `name` back to back for `seconds`, client i on urls[i]."""
    import httpx

    path, headers, body = REQUESTS[name]
    counts = [0, 0]
    deadline = time.monotonic() + seconds

    async def client(url: str) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            while time.monotonic() < deadline:
                answer = await http.post(path, headers=headers, content=body)
                counts[0 if answer.status_code == 200 else 1] += 1

    await asyncio.gather(*(client(url) for url in urls))
    return counts[0], counts[1]


def throughput(running: Sequence[Gateway], clients_n: int, seconds: float) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for name in REQUESTS:
        before = {g.url: g.cpu_s() for g in running}
        others_before, me_before = others_cpu(), time.process_time()
        start = time.monotonic()
        done, failed = asyncio.run(load(name, spread(clients_n, [g.url for g in running]), seconds))
        wall = time.monotonic() - start
        cpu = {f"gateway {i + 1}": g.cpu_s() - before[g.url] for i, g in enumerate(running)}
        cpu["clients"] = time.process_time() - me_before
        cpu.update({key: used - others_before[key] for key, used in others_cpu().items()})
        rows[name] = {"rps": round(done / wall), "failed": failed, "cpu_share": shares(cpu, wall, os.cpu_count() or 1),
                      "cpu_ms_per_request": per_request(cpu, done)}
        log(f"  {name} through {len(running)} gateway(s): {rows[name]}")
    return rows


# -- (c) takeover ---------------------------------------------------------------------------------------------


def takeovers(scratch: Path, state_url: str, kills: int) -> dict[str, Any]:
    times = []
    with gateways(2, scratch, state_url) as pair:
        for kill in range(kills):
            leading = leader_of({g.url: g.about() for g in pair})
            leader = next(g for g in pair if g.url == leading)
            follower = next(g for g in pair if g is not leader)
            # at a random point of the follower's 1 s cycle of tries: a gateway starts following just after a try,
            # so a kill at once after it follows would always wait the most for the next one
            time.sleep(random.Random(kill).uniform(0.0, 2.0))
            start = time.monotonic()
            os.kill(leader.process.pid, signal.SIGKILL)
            until(lambda f=follower: f.about().get("role") == "leader", 30, "the follower leading")
            times.append(time.monotonic() - start)
            log(f"  kill {kill + 1}: the follower leads after {times[-1]:.2f} s")
            leader.process.wait(10)
            again = Gateway(scratch / f"again-{kill}", state_url)
            pair[pair.index(leader)] = again
            until(lambda g=again: g.about().get("role") == "follower" and bool(g.about().get("leader")), 60,
                  "the restarted gateway following")
    return {**takeover(times), "each_s": [round(t, 2) for t in times]}


# -- the driver -----------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"cpus": os.cpu_count(), "load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="state-url-") as folder, database() as new_database:
        scratch = Path(folder)
        model_dir = byoc_model(scratch)
        for store, state_url in (("sqlite", None), ("postgresql", new_database())):
            log(f"(a) latency on {store}")
            with gateways(1, scratch, state_url) as (one,):
                deploy(one.url, model_dir, 1)
                results[f"latency_{store}"] = latency(one.url, model_dir, args.calls)
        log("(b) requests per second on postgresql")
        state_url = new_database()
        with gateways(2, scratch, state_url) as pair:
            leader = next(g for g in pair if g.about().get("role") == "leader")
            deploy(leader.url, model_dir, 1)
            follower = next(g for g in pair if g is not leader)
            until(lambda: _invokes(follower.url), 30, "the follower routing to the leader's copy")
            results["rps_one_gateway"] = throughput([leader], args.clients, args.seconds)
            results["rps_two_gateways"] = throughput(pair, args.clients, args.seconds)
        log("(c) takeover")
        results["takeover"] = takeovers(scratch, new_database(), args.kills)
    results["load_after"] = os.getloadavg()
    return results


def _invokes(url: str) -> bool:
    import httpx

    path, headers, body = REQUESTS["InvokeEndpoint"]
    return httpx.post(url + path, headers=headers, content=body, timeout=10).status_code == 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--role", choices=["driver", "pier-up"], default="driver")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state-dir", default="")
    parser.add_argument("--state-url", default="", help="the pier-up role's")
    parser.add_argument("--calls", type=int, default=200, help="(a): calls of each operation")
    parser.add_argument("--clients", type=int, default=16, help="(b): concurrent clients")
    parser.add_argument("--seconds", type=float, default=10.0, help="(b): per operation and gateway count")
    parser.add_argument("--kills", type=int, default=10, help="(c): kills of the leader")
    parser.add_argument("--json", default="", help="also write the results here")
    args = parser.parse_args()
    if args.role == "pier-up":
        sys.exit(serve_pier_up(args))
    results = run(args)
    print(json.dumps(results, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
