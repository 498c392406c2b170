"""Autoscaling under a rate schedule, and the first request from zero copies.

Starts a `pier up` gateway (its own process) in a fresh state folder, deploys an inference component of a
synthetic model (TINY by default, random weights, one request at a time per copy), registers it for autoscaling
(MinCapacity 0, MaxCapacity 4, target tracking on ConcurrentRequestsPerCopy), then:

1. `pier bench` with `--rate-schedule` through the component's OpenAI route: throughput, latency and the
   ready copies over time (`schedule.png` in --out), and every request's outcome;
2. `--cold-starts` times: wait for zero copies, send one request, and time its answer against the copy's start
   (the wake-up scaling activity, from StartTime to the copies being ready).

    python benchmarks/autoscaling.py --out /tmp/autoscaling --rate-schedule 1:40,6:60,1:40,0:40
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import boto3
import httpx
from botocore.config import Config
from common import free_port, log

SRC = Path(__file__).resolve().parent.parent / "src"
RESOURCE = {"ServiceNamespace": "sagemaker", "ResourceId": "inference-component/small",
            "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rate-schedule", default="1:40,6:60,1:40,0:40")
    parser.add_argument("--cold-starts", type=int, default=3)
    parser.add_argument("--scale-in-cooldown", type=int, default=20)
    parser.add_argument("--shape", default="tiny", help="the synthetic model: tiny or small")
    parser.add_argument("--per-copy", type=int, default=1, help="requests a copy takes at once")
    parser.add_argument("--output-len", type=int, default=16)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, value in (("AWS_ACCESS_KEY_ID", "x"), ("AWS_SECRET_ACCESS_KEY", "x"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(name, value)  # pier without keys takes any credentials; boto3 wants some
    folder = Path(tempfile.mkdtemp(prefix="pier-autoscaling-"))
    env = {**os.environ, "PYTHONPATH": str(SRC), "PIER_AUTOSCALING_INTERVAL_S": "1",
           "PIER_AUTOSCALING_HIGH_RESOLUTION_WINDOW_S": "5"}
    model = folder / "model"
    model.mkdir()
    subprocess.run([sys.executable, "-m", "pier", "build-model", str(model / "model.gguf"), "--shape", args.shape],
                   env=env, check=True, capture_output=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with (args.out / "gateway.log").open("wb") as gateway_log:
        gateway = subprocess.Popen([sys.executable, "-m", "pier.gateway", "--port", str(port), "--state-dir",
                                    str(folder / "state")], env=env, stdout=gateway_log, stderr=subprocess.STDOUT)
        try:
            _until(lambda: _ping(url), 60)
            _deploy(url, model, args.scale_in_cooldown, args.per_copy)
            log(f"gateway {url}: component small deployed and registered; running the schedule")
            target = f"{url}/endpoints/host/inference-components/small/openai/v1/chat/completions"
            subprocess.run([sys.executable, "-m", "pier", "bench", target, "--rate-schedule", args.rate_schedule,
                            "--input-len", "64", "--output-len", str(args.output_len), "--warmup", "0",
                            "--out", str(args.out),
                            "--no-progress"], env=env, check=False)
            cold = [_cold_start(url) for _ in range(args.cold_starts)]
        finally:
            gateway.terminate()
            gateway.wait(60)
    summary = _summary(args.out, cold)
    (args.out / "autoscaling.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))


def aws(url: str, service: str) -> Any:
    return boto3.client(service, endpoint_url=url, region_name="us-east-1",
                        config=Config(retries={"total_max_attempts": 1}, read_timeout=120))


def _deploy(url: str, model: Path, cooldown: int, per_copy: int) -> None:
    sagemaker = aws(url, "sagemaker")
    sagemaker.create_model(ModelName="small", PrimaryContainer={
        "Image": "pier", "ModelDataUrl": f"file://{model}",
        "Environment": {"MAX_CONCURRENT_REQUESTS": str(per_copy), "PIER_PARALLEL": str(per_copy)}})
    sagemaker.create_endpoint_config(EndpointConfigName="host", ProductionVariants=[{
        "VariantName": "AllTraffic", "InstanceType": "local", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName="host", EndpointConfigName="host")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="host", WaiterConfig={"Delay": 1})
    sagemaker.create_inference_component(
        InferenceComponentName="small", EndpointName="host", VariantName="AllTraffic",
        Specification={"ModelName": "small", "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 512}},
        RuntimeConfig={"CopyCount": 1})
    _until(lambda: _ready(url) == 1, 120)
    scaling = aws(url, "application-autoscaling")
    scaling.register_scalable_target(**RESOURCE, MinCapacity=0, MaxCapacity=4)
    scaling.put_scaling_policy(
        PolicyName="concurrency", PolicyType="TargetTrackingScaling", **RESOURCE,
        TargetTrackingScalingPolicyConfiguration={
            "PredefinedMetricSpecification": {
                "PredefinedMetricType": "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"},
            "TargetValue": 1, "ScaleOutCooldown": 10, "ScaleInCooldown": cooldown})


def _cold_start(url: str) -> dict[str, float]:
    _until(lambda: _ready(url) == 0, 300)
    time.sleep(1)
    runtime = aws(url, "sagemaker-runtime")
    started = time.monotonic()
    runtime.invoke_endpoint(EndpointName="host", InferenceComponentName="small", ContentType="application/json",
                            Body=json.dumps({"inputs": "hello", "parameters": {"max_new_tokens": 8}}))["Body"].read()
    answered = time.monotonic() - started
    scaling = aws(url, "application-autoscaling")

    def woken() -> dict[str, Any] | None:
        latest = scaling.describe_scaling_activities(ServiceNamespace="sagemaker", ResourceId=RESOURCE[
            "ResourceId"])["ScalingActivities"][0]
        return latest if latest["StatusCode"] == "Successful" and "had no copies" in latest["Cause"] else None

    activity = _until(woken, 30)
    copy_start = (activity["EndTime"] - activity["StartTime"]).total_seconds()
    log(f"cold start: answered in {answered:.2f} s; the copy's start {copy_start:.2f} s")
    return {"first_answer_s": round(answered, 2), "copy_start_s": round(copy_start, 2)}


def _summary(out: Path, cold: list[dict[str, float]]) -> dict[str, Any]:
    run = json.loads((out / "summary.json").read_text())["runs"][0]
    requests = json.loads((out / "requests.json").read_text())
    counts = [sum(sample["ready"].values()) for sample in run.get("copies") or []]
    return {
        "requests": len(requests), "failed": sum(1 for r in requests if r["error_code"] is not None),
        "copies_min": min(counts, default=None), "copies_max": max(counts, default=None),
        "copies_at_end": counts[-1] if counts else None, "cold_starts": cold,
    }


def _ping(url: str) -> bool:
    try:
        return httpx.get(url + "/ping", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _ready(url: str) -> int:
    copies = httpx.get(url + "/pier/copies", timeout=5).json()["copies"]
    return sum(1 for c in copies if c["component"] == "small" and c["state"] == "Ready")


def _until(condition: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    raise TimeoutError("not reached in time")


if __name__ == "__main__":
    main()
