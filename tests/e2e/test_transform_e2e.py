"""Batch transform as a SageMaker user runs it: boto3's create_transform_job against a `pier up` process, input
and output in moto's S3 (and file://), copies of a TINY GGUF started for the job and stopped after; then a
gateway killed with SIGKILL in the middle of a job, restarted, finishing it with every record exactly once."""

from __future__ import annotations

import gzip
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from tests.e2e.gateway_process import GatewayProcess
from tests.sockets import free_port
from tests.waiting import until

pytestmark = pytest.mark.e2e

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-tgi-inference:2.1-tgi2.0-gpu-py310"
# Each record carries an id the model never sees (InputFilter), joined back to its answer (JoinSource) and kept
# with it (OutputFilter), so the output says which record each line answers.
PROCESSING = {"InputFilter": "$['inputs','parameters']", "JoinSource": "Input",
              "OutputFilter": "$['id','SageMakerOutput']"}


@pytest.fixture(scope="module")
def model_dir(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("model")
    (folder / "model.gguf").symlink_to(tiny_gguf)
    return folder


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, s3_url: str) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("pier")
    env = {"AWS_ENDPOINT_URL_S3": s3_url, **CREDENTIALS}
    with GatewayProcess(folder / "state", free_port(), folder / "gateway.log", env) as process:
        yield process.wait_ready()


@pytest.fixture(scope="module")
def sagemaker(gateway: GatewayProcess, model_dir: Path) -> Any:
    client = boto3.client("sagemaker", endpoint_url=gateway.url, region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x")
    client.create_model(ModelName="tiny", ExecutionRoleArn="arn:aws:iam::1:role/sagemaker",
                        PrimaryContainer={"Image": IMAGE, "ModelDataUrl": f"file://{model_dir}",
                                          "Environment": {"MAX_TOTAL_TOKENS": "256", "PIER_PARALLEL": "4"}})
    return client


@pytest.fixture(scope="module")
def s3(s3_url: str) -> Any:
    client = boto3.client("s3", endpoint_url=s3_url, region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x")
    client.create_bucket(Bucket="batch")
    return client


def lines(first: int, count: int) -> bytes:
    return b"".join(json.dumps({"id": i, "inputs": f"record {i} says", "parameters": {"max_new_tokens": 2}})
                    .encode() + b"\n" for i in range(first, first + count))


def job(name: str, source: str, output: str, **extra: Any) -> dict[str, Any]:
    return {"TransformJobName": name, "ModelName": "tiny", "BatchStrategy": "SingleRecord",
            "TransformInput": {"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": source}},
                               "ContentType": "application/jsonlines", "SplitType": "Line"},
            "TransformOutput": {"S3OutputPath": output, "AssembleWith": "Line", "Accept": "application/json"},
            "TransformResources": {"InstanceType": "local", "InstanceCount": 1},
            "DataProcessing": PROCESSING, **extra}


def ids(data: bytes) -> list[int]:
    answers = [json.loads(line) for line in data.splitlines()]
    assert all(a["SageMakerOutput"][0]["generated_text"] is not None for a in answers)
    return [a["id"] for a in answers]


def ended(sagemaker: Any, name: str) -> dict[str, Any]:
    """DescribeTransformJob once the job has ended (polled, so a failure shows its FailureReason)."""
    return until(lambda: (lambda d: d if d["TransformJobStatus"] not in ("InProgress", "Stopping") else None)(
        sagemaker.describe_transform_job(TransformJobName=name)), timeout=600, what=f"job {name} ended")


def job_copies(url: str, name: str) -> list[dict[str, Any]]:
    return [c for c in httpx.get(f"{url}/pier/copies").json()["copies"] if c["component"].startswith(
        f"transform.{name}/")]


def test_a_prefix_of_json_lines_lands_where_aws_puts_it(gateway: GatewayProcess, sagemaker: Any, s3: Any) -> None:
    s3.put_object(Bucket="batch", Key="in/part-a.jsonl", Body=lines(0, 7))
    s3.put_object(Bucket="batch", Key="in/more/part-b.jsonl", Body=lines(7, 5))
    s3.put_object(Bucket="batch", Key="elsewhere/x.jsonl", Body=lines(99, 1))
    arn = sagemaker.create_transform_job(**job("prefix", "s3://batch/in/", "s3://batch/out"))["TransformJobArn"]
    assert arn.endswith(":transform-job/prefix")
    described = ended(sagemaker, "prefix")
    assert described["TransformJobStatus"] == "Completed", described.get("FailureReason")
    assert described["TransformInput"]["SplitType"] == "Line" and described["DataProcessing"] == PROCESSING
    assert described["TransformStartTime"] <= described["TransformEndTime"]
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="batch", Prefix="out/")["Contents"])
    assert keys == ["out/more/part-b.jsonl.out", "out/part-a.jsonl.out"]
    assert ids(s3.get_object(Bucket="batch", Key="out/part-a.jsonl.out")["Body"].read()) == list(range(7))
    assert ids(s3.get_object(Bucket="batch", Key="out/more/part-b.jsonl.out")["Body"].read()) == list(range(7, 12))
    listed = sagemaker.list_transform_jobs(StatusEquals="Completed")["TransformJobSummaries"]
    assert [s["TransformJobName"] for s in listed] == ["prefix"]
    progress = httpx.get(f"{gateway.url}/pier/transform-jobs/prefix").json()
    assert (progress["records"], progress["recordsWritten"], progress["objectsDone"]) == (12, 12, 2)
    until(lambda: not job_copies(gateway.url, "prefix"), what="the job's copies stopped")
    from typer.testing import CliRunner

    from pier.cli import app

    shown = CliRunner().invoke(app, ["transforms", "--url", gateway.url])
    assert shown.exit_code == 0 and "prefix" in shown.output and "12/12" in shown.output, shown.output


def test_the_sagemaker_sdks_transformer_unchanged(gateway: GatewayProcess, sagemaker: Any, s3: Any,
                                                  s3_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    sdk = pytest.importorskip("sagemaker", reason="the sagemaker SDK is in the test extra")
    from sagemaker.transformer import Transformer

    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_url)
    monkeypatch.setenv("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    session = sdk.Session(boto_session=boto3.Session(region_name="us-east-1", aws_access_key_id="x",
                                                     aws_secret_access_key="x"),
                          sagemaker_client=sagemaker, default_bucket="batch")
    transformer = Transformer(model_name="tiny", instance_count=1, instance_type="ml.m5.large",
                              strategy="SingleRecord", assemble_with="Line", output_path="s3://batch/sdk-out",
                              accept="application/json", sagemaker_session=session)
    transformer.transform("s3://batch/in/part-a.jsonl", content_type="application/jsonlines", split_type="Line",
                          job_name="from-the-sdk", wait=True, logs=False, **{
                              "input_filter": PROCESSING["InputFilter"], "join_source": "Input",
                              "output_filter": PROCESSING["OutputFilter"]})
    assert sagemaker.describe_transform_job(TransformJobName="from-the-sdk")["TransformJobStatus"] == "Completed"
    assert ids(s3.get_object(Bucket="batch", Key="sdk-out/part-a.jsonl.out")["Body"].read()) == list(range(7))


def test_file_urls_gzip_and_errors(gateway: GatewayProcess, sagemaker: Any, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "data.jsonl.gz").write_bytes(gzip.compress(lines(0, 4)))
    request = job("local-files", f"file://{tmp_path}/in/", f"file://{tmp_path}/out")
    request["TransformInput"]["CompressionType"] = "Gzip"
    sagemaker.create_transform_job(**request)
    with pytest.raises(sagemaker.exceptions.ResourceInUse):
        sagemaker.create_transform_job(**request)
    assert ended(sagemaker, "local-files")["TransformJobStatus"] == "Completed"
    assert ids((tmp_path / "out" / "data.jsonl.gz.out").read_bytes()) == [0, 1, 2, 3]
    with pytest.raises(sagemaker.exceptions.ClientError, match="pier splits records by Line or not at all"):
        bad = job("bad", "s3://batch/in/", "s3://batch/out")
        bad["TransformInput"]["SplitType"] = "RecordIO"
        sagemaker.create_transform_job(**bad)
    with pytest.raises(sagemaker.exceptions.ResourceNotFound):
        sagemaker.describe_transform_job(TransformJobName="nothing")
    with pytest.raises(sagemaker.exceptions.ResourceNotFound, match="Could not find model"):
        sagemaker.create_transform_job(**{**job("no-model", "s3://batch/in/", "s3://batch/out"), "ModelName": "none"})


def test_keys_and_manifests_cannot_reach_outside_the_jobs_folders(gateway: GatewayProcess, sagemaker: Any, s3: Any,
                                                                  tmp_path: Path) -> None:
    """Issue 41, as boto3 sees it: each job fails with its FailureReason, and nothing is read or written outside
    the folders it names. (Bucket 'batch' for the issue's 'b': S3 takes no one-letter bucket name.)"""
    s3.put_object(Bucket="batch", Key="pin/%2e%2e/%2e%2e/x.jsonl", Body=lines(0, 1))
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "hostname").write_text('{"inputs": "HOST-FILE-CONTENT"}\n')
    s3.put_object(Bucket="batch", Key="manifests/host.json",
                  Body=json.dumps([{"prefix": f"file://{tmp_path}/host/"}, "hostname"]).encode())
    (tmp_path / "in").mkdir()
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "s.jsonl").write_bytes(lines(0, 1))
    (tmp_path / "m.json").write_text(json.dumps([{"prefix": f"file://{tmp_path}/in/"}, "%2e%2e/secret/s.jsonl"]))
    manifest = {"S3DataSource": {"S3DataType": "ManifestFile", "S3Uri": "s3://batch/manifests/host.json"}}
    local = {"S3DataSource": {"S3DataType": "ManifestFile", "S3Uri": f"file://{tmp_path}/m.json"}}
    jobs = {"escape": job("escape", "s3://batch/pin/", f"file://{tmp_path}/srv/out/job"),
            "host-file": job("host-file", "s3://batch/unused/", "s3://batch/stolen"),
            "encoded": job("encoded", "s3://batch/unused/", f"file://{tmp_path}/out-encoded")}
    jobs["host-file"]["TransformInput"]["DataSource"] = manifest
    jobs["encoded"]["TransformInput"]["DataSource"] = local
    for request in jobs.values():
        sagemaker.create_transform_job(**request)
    reasons = {}
    for name in jobs:
        described = ended(sagemaker, name)
        assert described["TransformJobStatus"] == "Failed", described
        reasons[name] = described["FailureReason"]
    assert "The input '%2e%2e/%2e%2e/x.jsonl' cannot have its output under" in reasons["escape"]
    assert "a manifest's prefix must be of its own kind (s3://)" in reasons["host-file"]
    assert "lists a name outside its prefix: '%2e%2e/secret/s.jsonl'" in reasons["encoded"]
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()) == [
        "host/hostname", "m.json", "secret/s.jsonl"]
    assert "Contents" not in s3.list_objects_v2(Bucket="batch", Prefix="stolen/")


def test_a_gateway_killed_mid_job_finishes_it_with_every_record_once(gateway: GatewayProcess, sagemaker: Any,
                                                                      s3: Any) -> None:
    total = 300
    s3.put_object(Bucket="batch", Key="big/one.jsonl", Body=lines(0, total // 2))
    s3.put_object(Bucket="batch", Key="big/two.jsonl", Body=lines(total // 2, total // 2))
    sagemaker.create_transform_job(**job("killed", "s3://batch/big/", "s3://batch/big-out/"))
    progress = f"{gateway.url}/pier/transform-jobs/killed"
    until(lambda: httpx.get(progress).json()["unitsDone"] >= total // 4, timeout=300, what="a quarter done")
    gateway.process.send_signal(signal.SIGKILL)
    gateway.process.wait(30)
    again = GatewayProcess(gateway.state_dir, gateway.port, gateway.log, gateway.env)
    gateway.process = again.process  # the module's fixture stops whichever runs last
    again.wait_ready()
    resumed = httpx.get(progress).json()
    assert resumed["status"] == "InProgress" and total // 4 <= resumed["unitsDone"] < total
    described = ended(sagemaker, "killed")
    assert described["TransformJobStatus"] == "Completed", described
    one = ids(s3.get_object(Bucket="batch", Key="big-out/one.jsonl.out")["Body"].read())
    two = ids(s3.get_object(Bucket="batch", Key="big-out/two.jsonl.out")["Body"].read())
    assert one + two == list(range(total))
    assert "resuming transform job killed" in gateway.output()


def test_stop_a_job(gateway: GatewayProcess, sagemaker: Any, s3: Any) -> None:
    s3.put_object(Bucket="batch", Key="stop/a.jsonl", Body=lines(0, 400))
    sagemaker.create_transform_job(**job("stopped", "s3://batch/stop/", "s3://batch/stop-out/"))
    until(lambda: httpx.get(f"{gateway.url}/pier/transform-jobs/stopped").json()["unitsDone"] > 0, timeout=300,
          what="records flowing")
    sagemaker.stop_transform_job(TransformJobName="stopped")
    described = ended(sagemaker, "stopped")
    assert described["TransformJobStatus"] == "Stopped", described
    until(lambda: not job_copies(gateway.url, "stopped"), what="the job's copies stopped")
