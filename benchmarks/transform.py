"""Batch transform's throughput against the best its copies reach when driven directly (issue 28).

Starts a `pier up` gateway (its own process) in a fresh state folder with a synthetic model (TINY by default),
then on the same instance type and count:

1. the copies' best: a classic endpoint of the model, the same records sent with InvokeEndpoint by closed-loop
   clients at 1x and 2x (copies x parallel sequences) at once, the faster level kept (records/s);
2. the batch: CreateTransformJob over the records as JSON lines (file:// input and output, SplitType Line,
   SingleRecord), records/s from TransformStartTime (copies ready, records flowing) to TransformEndTime, and
   from CreateTransformJob to Completed (which adds the copies' start), and the share of the copies' turns
   (copies x parallel sequences) holding a record, sampled every 0.1 s while records flow (GET /pier/transform-jobs).

    python benchmarks/transform.py --out /tmp/transform --records 1000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import httpx
from botocore.config import Config
from common import free_port, log

SRC = Path(__file__).resolve().parent.parent / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--files", type=int, default=4, help="input objects the records are spread over")
    parser.add_argument("--shape", default="tiny", help="the synthetic model: tiny or small")
    parser.add_argument("--copies", type=int, default=1, help="InstanceCount (instance type local: this host)")
    parser.add_argument("--parallel", type=int, default=8, help="PIER_PARALLEL: sequences a copy decodes at once")
    parser.add_argument("--output-len", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2, help="direct, batch, direct, batch, ...: drift hits both")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, value in (("AWS_ACCESS_KEY_ID", "x"), ("AWS_SECRET_ACCESS_KEY", "x"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(name, value)
    folder = Path(tempfile.mkdtemp(prefix="pier-transform-"))
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_WAIT_POLICY": "passive"}
    model = folder / "model"
    model.mkdir()
    subprocess.run([sys.executable, "-m", "pier", "build-model", str(model / "model.gguf"), "--shape", args.shape],
                   env=env, check=True, capture_output=True)
    records = [{"inputs": f"record {i}: tell me about the {i % 97}th word", "parameters": {
        "max_new_tokens": args.output_len, "ignore_eos": True}} for i in range(args.records)]
    inputs = folder / "in"
    inputs.mkdir()
    for f in range(args.files):
        (inputs / f"part-{f}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records[f :: args.files]))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with (args.out / "gateway.log").open("wb") as gateway_log:
        gateway = subprocess.Popen([sys.executable, "-m", "pier.gateway", "--port", str(port), "--state-dir",
                                    str(folder / "state")], env=env, stdout=gateway_log, stderr=subprocess.STDOUT)
        try:
            _until(lambda: _ping(url), 60)
            sagemaker = aws(url, "sagemaker")
            sagemaker.create_model(ModelName="m", PrimaryContainer={
                "Image": "pier", "ModelDataUrl": f"file://{model}",
                "Environment": {"PIER_PARALLEL": str(args.parallel), "MAX_TOTAL_TOKENS": "512"}})
            rounds = []
            for repeat in range(args.repeats):
                best = _copies_best(url, records, args, repeat)
                batch = _batch(url, folder, args, repeat)
                rounds.append({**best, **batch,
                               "ratio": round(batch["batch_records_per_s"] / best["best_records_per_s"], 3)})
        finally:
            gateway.terminate()
            gateway.wait(60)
    outputs = [sum(len((folder / f"out-{r}" / f"part-{f}.jsonl.out").read_text().splitlines())
                   for f in range(args.files)) for r in range(args.repeats)]
    summary = {"records": args.records, "outputs": outputs, "copies": args.copies, "parallel": args.parallel,
               "output_len": args.output_len, "shape": args.shape, "cpus": os.cpu_count(), "rounds": rounds,
               "median_ratio": statistics.median(r["ratio"] for r in rounds),
               "pooled_ratio": round(sum(r["batch_records_per_s"] for r in rounds)
                                     / sum(r["best_records_per_s"] for r in rounds), 3)}
    (args.out / "transform.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))


def aws(url: str, service: str) -> Any:
    return boto3.client(service, endpoint_url=url, region_name="us-east-1",
                        config=Config(retries={"total_max_attempts": 1}, read_timeout=600,
                                      max_pool_connections=256))


def _copies_best(url: str, records: list[dict[str, Any]], args: argparse.Namespace, repeat: int) -> dict[str, Any]:
    sagemaker, runtime = aws(url, "sagemaker"), aws(url, "sagemaker-runtime")
    if repeat == 0:
        sagemaker.create_endpoint_config(EndpointConfigName="direct", ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "local",
            "InitialInstanceCount": args.copies}])
    sagemaker.create_endpoint(EndpointName="direct", EndpointConfigName="direct")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="direct", WaiterConfig={"Delay": 1,
                                                                                         "MaxAttempts": 300})

    def invoke(record: dict[str, Any]) -> None:
        runtime.invoke_endpoint(EndpointName="direct", ContentType="application/json",
                                Body=json.dumps(record))["Body"].read()

    levels = {}
    for clients in (args.copies * args.parallel, 2 * args.copies * args.parallel):
        started = time.monotonic()
        with ThreadPoolExecutor(clients) as pool:
            list(pool.map(invoke, records))
        levels[clients] = round(len(records) / (time.monotonic() - started), 2)
        log(f"copies driven directly, {clients} clients: {levels[clients]} records/s")
    sagemaker.delete_endpoint(EndpointName="direct")
    sagemaker.get_waiter("endpoint_deleted").wait(EndpointName="direct", WaiterConfig={"Delay": 1})
    _until(lambda: not httpx.get(f"{url}/pier/copies").json()["copies"], 120)  # the cores are free again
    return {"direct_records_per_s": levels, "best_records_per_s": max(levels.values())}


def _batch(url: str, folder: Path, args: argparse.Namespace, repeat: int) -> dict[str, Any]:
    sagemaker = aws(url, "sagemaker")
    name = f"bench-{repeat}"
    created = time.monotonic()
    sagemaker.create_transform_job(
        TransformJobName=name, ModelName="m", BatchStrategy="SingleRecord",
        TransformInput={"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": f"file://{folder}/in/"}},
                        "ContentType": "application/json", "SplitType": "Line"},
        TransformOutput={"S3OutputPath": f"file://{folder}/out-{repeat}", "AssembleWith": "Line"},
        TransformResources={"InstanceType": "local", "InstanceCount": args.copies})
    occupancy = []  # records in flight over the turns there are, sampled while records flow
    while True:
        progress = httpx.get(f"{url}/pier/transform-jobs/{name}").json()
        if progress["status"] != "InProgress":
            break
        if progress["unitsDone"] and progress["unitsDone"] < progress["records"] - args.copies * args.parallel:
            occupancy.append(progress["inFlight"] / (args.copies * args.parallel))
        time.sleep(0.1)
    wall = time.monotonic() - created
    job = sagemaker.describe_transform_job(TransformJobName=name)
    if job["TransformJobStatus"] != "Completed":
        raise SystemExit(f"the job ended {job['TransformJobStatus']}: {job.get('FailureReason')}")
    flowing = (job["TransformEndTime"] - job["TransformStartTime"]).total_seconds()
    _until(lambda: not httpx.get(f"{url}/pier/copies").json()["copies"], 120)  # its copies stopped
    log(f"batch: {args.records / flowing:.2f} records/s while records flowed, {wall:.1f} s in all")
    return {"batch_records_per_s": round(args.records / flowing, 2), "batch_flowing_s": round(flowing, 2),
            "batch_turns_busy": round(statistics.mean(occupancy), 3) if occupancy else None,
            "batch_wall_s": round(wall, 2)}


def _ping(url: str) -> bool:
    try:
        return httpx.get(f"{url}/ping", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def _until(condition: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise SystemExit(f"gave up after {timeout} s")


if __name__ == "__main__":
    main()
