"""Nothing blocks the gateway's event loop: a `pier up` process answers `/ping` within 50 ms while another process
sends it the largest PutMetricData calls AWS allows (1000 metrics of 150 values, each counted a million times,
gzipped by botocore), reads them back, and makes control-plane and Application Auto Scaling calls, all through
boto3's own clients."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.server.processes import ServerProcess, pier_environment
from tests.sockets import free_port

pytestmark = pytest.mark.e2e

PING_LIMIT_S = 0.050
RUNS = 3
LOAD = textwrap.dedent('''
    import sys, time
    import boto3
    from botocore.config import Config
    url, run = sys.argv[1], sys.argv[2]  # each run its own names: a second run starts from nothing of the first's
    def aws(service):
        return boto3.client(service, endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                            aws_secret_access_key="x",
                            config=Config(retries={"total_max_attempts": 1}, read_timeout=120))
    cw, sm, aas = aws("cloudwatch"), aws("sagemaker"), aws("application-autoscaling")
    full = [{"MetricName": "Load", "Dimensions": [{"Name": "Row", "Value": str(i)}],
             "Values": [float(v) for v in range(150)], "Counts": [1e6] * 150} for i in range(1000)]
    started = time.monotonic()
    for round in range(3):
        cw.put_metric_data(Namespace=f"Loop{run}", MetricData=full)
        cw.put_metric_data(Namespace=f"Loop{run}", MetricData=[{"MetricName": "One", "Values": [1.0], "Counts": [1e6]}])
        for i in range(20):
            sm.create_model(ModelName=f"m{run}-{round}-{i}",
                            PrimaryContainer={"Image": "pier", "ModelDataUrl": "file:///nowhere"})
        sm.list_models(MaxResults=100)
        aas.describe_scalable_targets(ServiceNamespace="sagemaker")
        cw.list_metrics(Namespace=f"Loop{run}")
        now = time.time()
        stats = cw.get_metric_statistics(Namespace=f"Loop{run}", MetricName="Load", StartTime=now - 600,
                                         EndTime=now + 1, Period=60, Statistics=["SampleCount"],
                                         Dimensions=[{"Name": "Row", "Value": "7"}])
        assert sum(p["SampleCount"] for p in stats["Datapoints"]) == 150e6 * (round + 1), stats
    print(f"load took {time.monotonic() - started:.2f} s", flush=True)
''')


def _probe_during_load(url: str, run: int) -> tuple[list[float], str]:
    """/ping's waits, sorted, while the load runs once; and what the load printed."""
    waits: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        with httpx.Client(base_url=url, timeout=10) as http:
            while not stop.is_set():
                started = time.perf_counter()
                assert http.get("/ping").status_code == 200
                waits.append(time.perf_counter() - started)
                time.sleep(0.01)

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        load = subprocess.run([sys.executable, "-c", LOAD, url, str(run)], capture_output=True, text=True,
                              timeout=300)
    finally:
        stop.set()
        prober.join()
    assert load.returncode == 0, load.stderr
    assert len(waits) > 20, load.stdout  # the probe ran all through the load
    return sorted(waits), load.stdout.strip()


def test_ping_stays_under_50_ms_while_the_largest_aws_calls_run(tmp_path: Path) -> None:
    """Best of RUNS: a loop that blocks (a parse holding the GIL 30-70 ms on each of the largest calls) fails every
    run; a host busy with other work can delay one ping of a run past the limit on its own."""
    port = free_port()
    argv = [sys.executable, "-m", "pier", "up", "--port", str(port), "--state-dir", str(tmp_path / "state")]
    with ServerProcess(argv, port, tmp_path / "gateway.log", pier_environment()) as gateway:
        gateway.wait_ready()
        seen: list[str] = []
        for run in range(RUNS):
            waits, printed = _probe_during_load(gateway.url, run)
            median = waits[len(waits) // 2]
            seen.append(f"/ping waited {waits[-1] * 1000:.1f} ms (median {median * 1000:.1f} ms; {printed})")
            if waits[-1] < PING_LIMIT_S:
                return
        raise AssertionError(f"in each of {RUNS} runs: " + "; ".join(seen) + "\n" + gateway.output())
