"""A gateway whose host lacks the folder the leader fetched an adapter to (a follower with a state folder of its
own) fetches the adapter itself into its own model store: once, however many requests want it; they wait for it;
a fetch that fails answers them with what to fix. The leader's gateway (the folder is there) is unchanged.

Two gateways' model stores in temporary folders stand for two hosts: the leader's is fetched into and removed,
so the follower sees a path its host does not have, as a follower on another host does."""

from __future__ import annotations

import asyncio
import io
import shutil
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import openai
import pytest
from botocore.exceptions import ClientError
from fastapi import FastAPI
from rich.console import Console

from pier.backends.base import CopyState, CopyStatus
from pier.channel.headers import ADAPTER_FILE_HEADER
from pier.control.fetch.fetches import Fetches
from pier.control.fetch.model_store import ModelStore
from pier.control.fetch.source import ModelSource
from pier.control.reconciler import component_source
from pier.control.records import ComponentRecord, EndpointRecord, VariantRecord
from pier.control.resource_store import ResourceStore
from pier.control.shapes import ComponentSpec, ContainerSpec
from pier.gateway.adapter_files import AdapterFiles
from pier.gateway.targets import Targets
from pier.runtime.errors import ModelNotReady, ServiceUnavailable
from pier.runtime.http_api import openai_api, runtime_api
from pier.runtime.invoke import RuntimeService
from pier.runtime.target import Target
from pier.synthetic.lora import build_lora_gguf
from tests.runtime.servers import echo_app, runtime_client
from tests.sockets import serving

BASE, ADAPTER = "base", "adapter"


class Counted(ModelStore):
    """A gateway's model store that counts its fetches, each held until `gate` opens."""

    def __init__(self, root: Path, gate: threading.Event | None = None) -> None:
        super().__init__(root, console=Console(quiet=True))
        self.gate = gate
        self.fetched: list[str] = []

    def fetch(self, source: ModelSource) -> Path:
        self.fetched.append(source.url)
        if self.gate is not None:
            assert self.gate.wait(30), "the test never opened the gate"
        return super().fetch(source)


@pytest.fixture
def lora(tmp_path: Path) -> Path:
    path = tmp_path / "artifacts" / "adapter.gguf"
    path.parent.mkdir()
    build_lora_gguf(path)
    return path


def tar_gz(gguf: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(gguf, arcname="adapter.gguf")
    return buffer.getvalue()


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from moto import mock_aws

    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="models")
        yield client


def adapter_record(url: str, model_dir: str) -> ComponentRecord:
    specification = ComponentSpec.model_validate({"BaseInferenceComponentName": BASE,
                                                  "Container": {"ArtifactUrl": url}})
    return ComponentRecord(name=ADAPTER, arn="arn:adapter", created=1, modified=1, endpoint="host",
                           variant="AllTraffic", status="InService", specification=specification,
                           container=ContainerSpec(), copies=0, model_dir=model_dir, weights_mb=1)


def fetched_by_the_leader(tmp_path: Path, url: str) -> ComponentRecord:
    """The adapter's record as the leader's reconciler leaves it, on a host this one is not: the folder it
    recorded is gone from here."""
    record = adapter_record(url, "")
    folder = ModelStore(tmp_path / "leader" / "models", console=Console(quiet=True)).fetch(component_source(record))
    shutil.rmtree(tmp_path / "leader")
    return record.model_copy(update={"model_dir": str(folder)})


def relative(path: str, root: Path) -> Path:
    return Path(path).relative_to(root / "models")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the gateway's loop; Fetches hands results back through it


def adapter_url(kind: str, lora: Path, s3: Any) -> str:
    if kind == "file.tar.gz":
        archive = lora.parent / "adapter.tar.gz"
        archive.write_bytes(tar_gz(lora))
        return f"file://{archive}"
    if kind == "file.gguf":
        return f"file://{lora}"
    s3.put_object(Bucket="models", Key="adapters/adapter.gguf", Body=lora.read_bytes())
    return "s3://models/adapters/adapter.gguf"


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["file.tar.gz", "file.gguf", "s3"])
async def test_a_follower_fetches_the_adapter_into_its_own_store_once(tmp_path: Path, lora: Path, s3: Any,
                                                                      kind: str) -> None:
    record = fetched_by_the_leader(tmp_path, adapter_url(kind, lora, s3))
    gate = threading.Event()
    store = Counted(tmp_path / "follower" / "models", gate)
    files = AdapterFiles(Fetches(store), wait_s=30)
    assert files.here(record) is None  # not on this host: the follower must fetch it

    waiting = [asyncio.ensure_future(files.fetched(record)) for _ in range(5)]
    await asyncio.sleep(0)  # every request is waiting for the one fetch, held at the gate
    assert not any(w.done() for w in waiting)
    gate.set()
    answers = await asyncio.gather(*waiting)
    assert len(store.fetched) == 1
    [path] = {a[ADAPTER_FILE_HEADER] for a in answers}
    assert Path(path).is_file() and Path(path).read_bytes() == lora.read_bytes()
    # the same bytes land at the same place under the follower's models/ as under the leader's
    assert Path(path).is_relative_to(tmp_path / "follower" / "models")
    assert relative(str(Path(path).parent), tmp_path / "follower") == relative(record.model_dir or "",
                                                                              tmp_path / "leader")
    assert await files.fetched(record) == answers[0] and len(store.fetched) == 1  # fetched once, kept


@pytest.mark.anyio
async def test_a_request_waits_no_longer_than_its_deadline_and_the_fetch_goes_on(tmp_path: Path,
                                                                                 lora: Path) -> None:
    record = fetched_by_the_leader(tmp_path, f"file://{lora}")
    gate = threading.Event()
    store = Counted(tmp_path / "follower" / "models", gate)
    files = AdapterFiles(Fetches(store), wait_s=0.01)
    with pytest.raises(ModelNotReady, match=r"adapter's files are still being fetched by this gateway from "
                                            rf"file://{lora} .* Retry in a few seconds"):
        await files.fetched(record)
    gate.set()
    files.wait_s = 30
    assert Path((await files.fetched(record))[ADAPTER_FILE_HEADER]).is_file()
    assert len(store.fetched) == 1  # the request that gave up left the fetch running for the next


@pytest.mark.anyio
async def test_a_failed_fetch_says_what_to_fix_and_is_tried_again_later(tmp_path: Path, lora: Path,
                                                                        s3: Any) -> None:
    url = adapter_url("s3", lora, s3)
    record = fetched_by_the_leader(tmp_path, url)
    s3.delete_object(Bucket="models", Key="adapters/adapter.gguf")  # gone since the leader fetched it
    store = Counted(tmp_path / "follower" / "models")
    now = [100.0]
    files = AdapterFiles(Fetches(store), wait_s=30, retry_s=10, clock=lambda: now[0])
    for _ in range(2):  # a client's retries meet the same failure, not a fetch each
        with pytest.raises(ServiceUnavailable) as failed:
            await files.fetched(record)
        assert f"{ADAPTER}'s files are not on this gateway's host (the leader fetched them to {record.model_dir}) " \
               f"and this gateway could not fetch them itself: Nothing under {url}: upload the model files " \
               "there" in failed.value.message
        assert "share the leader's models folder at that path, or invoke through the leader" in failed.value.message
    assert len(store.fetched) == 1
    s3.put_object(Bucket="models", Key="adapters/adapter.gguf", Body=lora.read_bytes())  # the operator mends it
    now[0] += 10
    assert Path((await files.fetched(record))[ADAPTER_FILE_HEADER]).read_bytes() == lora.read_bytes()
    assert len(store.fetched) == 2


def state_with(tmp_path: Path, record: ComponentRecord) -> ResourceStore:
    state = ResourceStore.open(tmp_path / "state")
    state.endpoints.put(EndpointRecord(name="host", arn="arn:host", created=1, modified=1, config_name="c",
                                       status="InService", variants=(VariantRecord(
                                           name="AllTraffic", instance_type="local", instance_count=1, weight=1,
                                           model=None),)))
    base = ComponentSpec.model_validate({"ModelName": "m",
                                         "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 256}})
    state.components.put(ComponentRecord(name=BASE, arn="arn:base", created=1, modified=1, endpoint="host",
                                         variant="AllTraffic", status="InService", specification=base,
                                         container=ContainerSpec(), copies=1))
    state.components.put(record)
    return state


def test_on_the_leaders_host_the_recorded_file_is_used_as_before(tmp_path: Path, lora: Path) -> None:
    record = adapter_record(f"file://{lora}", "")
    leader = ModelStore(tmp_path / "leader" / "models", console=Console(quiet=True))
    record = record.model_copy(update={"model_dir": str(leader.fetch(component_source(record)))})
    store = Counted(tmp_path / "follower" / "models")
    targets = Targets(state_with(tmp_path, record), lambda w: [CopyStatus("c0", w, CopyState.READY, "http://c")],
                      adapter_files=AdapterFiles(Fetches(store), wait_s=30))
    target = targets.resolve("host", ADAPTER, None)
    assert isinstance(target, Target)  # no waiting: the file is where the record says
    assert target.files == {ADAPTER_FILE_HEADER: f"{record.model_dir}/adapter.gguf"}
    assert store.fetched == []


def gateway_app(targets: Targets) -> FastAPI:
    service = RuntimeService(targets.resolve)
    app = FastAPI()
    app.include_router(runtime_api(service))
    app.include_router(openai_api(service))
    return app


def test_invoked_through_a_follower_the_copy_is_named_the_followers_file(tmp_path: Path, lora: Path) -> None:
    record = fetched_by_the_leader(tmp_path, f"file://{lora}")
    seen: list[dict[str, Any]] = []
    with serving(echo_app(seen)) as copy_url:
        store = Counted(tmp_path / "follower" / "models")
        targets = Targets(state_with(tmp_path, record),
                          lambda w: [CopyStatus("c0", w, CopyState.READY, copy_url)],
                          adapter_files=AdapterFiles(Fetches(store), wait_s=30))
        with serving(gateway_app(targets)) as url:
            answer = runtime_client(url).invoke_endpoint(EndpointName="host", InferenceComponentName=ADAPTER,
                                                         Body=b'{"inputs": "hi"}', ContentType="application/json")
    assert answer["Body"].read() == b'{"inputs": "hi"}'
    [request] = seen
    path = Path(request["headers"][ADAPTER_FILE_HEADER.lower()])
    assert path.is_relative_to(tmp_path / "follower" / "models") and path.read_bytes() == lora.read_bytes()
    assert request["headers"]["x-pier-adapter"] == ADAPTER


def test_a_failed_fetch_is_answered_in_each_apis_shape(tmp_path: Path, lora: Path) -> None:
    archive = lora.parent / "adapter.tar.gz"
    archive.write_bytes(tar_gz(lora))
    record = fetched_by_the_leader(tmp_path, f"file://{archive}")
    archive.unlink()  # the leader's host had it; this one has not
    targets = Targets(state_with(tmp_path, record), lambda w: [CopyStatus("c0", w, CopyState.READY, "http://c")],
                      adapter_files=AdapterFiles(Fetches(Counted(tmp_path / "follower" / "models")), wait_s=30))
    with serving(gateway_app(targets)) as url:
        with pytest.raises(ClientError) as refused:
            runtime_client(url).invoke_endpoint(EndpointName="host", InferenceComponentName=ADAPTER, Body=b"{}",
                                                ContentType="application/json")
        error = refused.value.response["Error"]
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
        assert error["Code"] == "ServiceUnavailable"
        assert f"could not fetch them itself: No model at {archive}" in error["Message"]
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.APIStatusError) as unavailable:
            client.chat.completions.create(model=ADAPTER, messages=[{"role": "user", "content": "hi"}])
        assert unavailable.value.status_code == 503
        body = unavailable.value.body
        assert isinstance(body, dict) and body["type"] == "service_unavailable_error"
        assert f"could not fetch them itself: No model at {archive}" in body["message"]
