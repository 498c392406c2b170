"""Issue 40's must-show: the async queue across a leader kill. Two `pier up` processes on one PostgreSQL with the
local backend and a TINY GGUF, an asynchronous endpoint writing to moto's S3 (versioned: every PUT that lands is a
version) and notifying an SNS topic through PIER_ASYNC_NOTIFICATION_URL. N requests through boto3's
invoke_endpoint_async, split over both gateways; kill -9 of the leader while some run; the follower leads and
finishes: N answers out, each written once (one version of each object), none failed, no notification twice.

The gateways reach moto through a proxy that holds the reply to one answer's PUT (the object is in the bucket, the
leader does not know it yet): the leader is killed then, in the narrowest of a request's windows (its answer
written, not recorded), which a new leader that simply ran the request again would answer twice.

With the local backend the killed leader's copies die with it; the new leader starts new ones."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import boto3
import httpx
import pytest

from tests.e2e.gateway_process import GatewayProcess
from tests.gateway.served import sagemaker_client
from tests.postgres import PostgresServer
from tests.sockets import free_port
from tests.waiting import until

pytestmark = pytest.mark.e2e

N = 30
BUCKET = "answers-across-a-kill"  # moto keeps one state per process: a bucket of its own
FAKE_AWS = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}
TOPIC = "arn:aws:sns:us-east-1:123456789012:done"


class Relay(BaseHTTPRequestHandler):
    """What pier POSTs for an SNS topic (SNS's envelope): the inference ids notified, in order."""

    notified: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        envelope = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.notified.append(json.loads(envelope["Message"])["inferenceId"])
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def relay() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Relay)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/sns"
    finally:
        server.shutdown()


class Holding(BaseHTTPRequestHandler):
    """A proxy to moto's S3 that, once armed, holds the reply to the next PUT of an answer for HOLD_S seconds after
    moto has stored it."""

    upstream: ClassVar[str] = ""
    armed: ClassVar[threading.Event] = threading.Event()
    held: ClassVar[list[str]] = []
    HOLD_S: ClassVar[float] = 5.0
    protocol_version = "HTTP/1.1"

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        reply = httpx.request(self.command, self.upstream + self.path, headers=headers, content=body, timeout=30)
        if self.command == "PUT" and self.path.startswith(f"/{BUCKET}/out/") and self.armed.is_set():
            self.armed.clear()
            self.held.append(self.path)
            time.sleep(self.HOLD_S)  # the leader is killed meanwhile
        try:
            self.send_response(reply.status_code)
            for name, value in reply.headers.items():
                if name.lower() not in ("transfer-encoding", "connection", "content-length", "content-encoding"):
                    self.send_header(name, value)
            self.send_header("Content-Length", reply.headers.get("content-length", "0") if self.command == "HEAD"
                             else str(len(reply.content)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(reply.content)
        except OSError:
            pass  # the gateway that asked is gone

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def holding(s3_url: str) -> Iterator[str]:
    Holding.upstream = s3_url
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Holding)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


def role(gateway: GatewayProcess) -> dict[str, Any]:
    return httpx.get(gateway.url + "/pier", timeout=5).json()  # type: ignore[no-any-return]


def s3_client(url: str) -> Any:
    return boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="x")


def keys(s3: Any, prefix: str) -> list[str]:
    return [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])]


def test_n_requests_in_n_answers_out_none_twice_across_a_leader_kill(
        tmp_path: Path, tiny_gguf: Path, postgres_server: PostgresServer, s3_url: str, holding: str,
        relay: str) -> None:
    s3 = s3_client(s3_url)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket=BUCKET, Key="in/ask.json", Body=json.dumps(
        {"inputs": "the quick brown fox", "parameters": {"max_new_tokens": 48, "ignore_eos": True}}).encode())
    url = postgres_server.database()
    env = {**FAKE_AWS, "AWS_ENDPOINT_URL_S3": holding, "PIER_ASYNC_NOTIFICATION_URL": relay}
    options = ("--state-url", url)
    with GatewayProcess(tmp_path / "a", free_port(), tmp_path / "a.log", env, options) as first:
        first.wait_ready()
        until(lambda: role(first)["role"] == "leader", timeout=20, what="the first gateway leading")
        with GatewayProcess(tmp_path / "b", free_port(), tmp_path / "b.log", env, options) as second:
            second.wait_ready()
            until(lambda: role(second)["leader"] == role(first)["gateway"], timeout=20, what="a follower")
            sagemaker = sagemaker_client(first.url)
            sagemaker.create_model(ModelName="tiny", PrimaryContainer={
                "ModelDataUrl": str(tiny_gguf), "Environment": {"PIER_PARALLEL": "2"}})
            sagemaker.create_endpoint_config(
                EndpointConfigName="tiny", ProductionVariants=[{
                    "VariantName": "AllTraffic", "ModelName": "tiny", "InstanceType": "local",
                    "InitialInstanceCount": 1}],
                AsyncInferenceConfig={"OutputConfig": {"S3OutputPath": f"s3://{BUCKET}/out",
                                                       "S3FailurePath": f"s3://{BUCKET}/failed",
                                                       "NotificationConfig": {"SuccessTopic": TOPIC,
                                                                              "ErrorTopic": TOPIC}},
                                      "ClientConfig": {"MaxConcurrentInvocationsPerInstance": 2}})
            sagemaker.create_endpoint(EndpointName="tiny", EndpointConfigName="tiny")
            sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="tiny",
                                                             WaiterConfig={"Delay": 0.5, "MaxAttempts": 240})
            runtimes = [boto3.client("sagemaker-runtime", endpoint_url=g.url, region_name="us-east-1",
                                     aws_access_key_id="x", aws_secret_access_key="x") for g in (first, second)]
            replies = [runtimes[i % 2].invoke_endpoint_async(
                EndpointName="tiny", InputLocation=f"s3://{BUCKET}/in/ask.json", ContentType="application/json",
                InferenceId=f"ask-{i}") for i in range(N)]
            assert len({r["OutputLocation"] for r in replies}) == N
            until(lambda: len(keys(s3, "out/")) >= 4, timeout=120, interval=0.1, what="a few answered")
            Holding.armed.set()
            until(lambda: bool(Holding.held), timeout=60, interval=0.05, what="an answer's PUT held")
            first.process.kill()  # kill -9 of the leader: one answer written, unrecorded; others running
            answered_before = len(keys(s3, "out/"))
            assert answered_before < N, "every request was answered before the kill: nothing was left to take over"
            until(lambda: role(second)["role"] == "leader", timeout=15, interval=0.1, what="the follower leading")
            until(lambda: len(keys(s3, "out/")) == N, timeout=240, what=f"{N} answers")
            until(lambda: len(Relay.notified) >= N - 2, timeout=30, what="the notifications")
            taken_over = second.output()
    written = {key: len(s3.list_object_versions(Bucket=BUCKET, Prefix=key).get("Versions", []))
               for key in keys(s3, "out/")}
    expected = {r["OutputLocation"].removeprefix(f"s3://{BUCKET}/") for r in replies}
    assert set(written) == expected
    assert [key for key, versions in written.items() if versions != 1] == [], written  # none answered twice
    assert keys(s3, "failed/") == []
    twice = [id for id, count in Counter(Relay.notified).items() if count > 1]
    assert twice == [] and set(Relay.notified) <= {f"ask-{i}" for i in range(N)}
    # at most the requests the leader was notifying as it died go without one (at most once, never twice)
    assert len(Relay.notified) >= N - 2, len(Relay.notified)
    assert "wait again" in taken_over, "the new leader found no request that was running when the leader died"
    assert "was answered before its leader stopped: not run again" in taken_over  # the held one
    print(f"{answered_before} of {N} answered before the kill; {len(Relay.notified)} notified")
