"""The whole data plane on real processes: boto3 → gateway routes → copy chooser → two copies the local backend
started on a TINY GGUF, one of which is killed along the way."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn
from botocore.exceptions import ClientError
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from pier.backends.base import CopyState, CopyStatus
from pier.channel.copy_secret import copy_secret_header
from pier.runtime.errors import EndpointNotFound
from pier.runtime.http_api import runtime_api
from pier.runtime.invoke import RuntimeService
from pier.runtime.target import Target
from tests.backends.conftest import Running, backend_running, spec
from tests.runtime.servers import runtime_client as client
from tests.sockets import free_port

pytestmark = pytest.mark.e2e

COPIES = ["llm-1", "llm-2"]
GENERATE = {"inputs": "the cat", "parameters": {"max_new_tokens": 3}}


@dataclass
class Plane:
    url: str
    running: Running
    service: RuntimeService


@pytest.fixture(scope="module")
def plane(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    with backend_running(tmp_path_factory.mktemp("state")) as running:
        for index, copy_id in enumerate(COPIES):
            running.loop.run(running.backend.start(spec(copy_id, model_dir, index)))

        def resolve(endpoint: str, component: str | None, variant: str | None) -> Target:
            if endpoint != "llm":
                raise EndpointNotFound(endpoint, "000000000000")
            return Target.of(endpoint, running.backend.statuses())

        service = RuntimeService(resolve)
        app = FastAPI()
        app.include_router(runtime_api(service))
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning",
                                               lifespan="off"))
        serving = asyncio.run_coroutine_threadsafe(server.serve(), running.loop.loop)  # the backend's loop
        running.wait_for(lambda: server.started, 10, "the gateway to listen")
        running.wait_ready(*COPIES)
        try:
            yield Plane(f"http://127.0.0.1:{server.config.port}", running, service)
        finally:
            server.should_exit = True
            serving.result(15)
            running.loop.run(service.aclose())


def invocations_served(copy: CopyStatus) -> float:
    assert copy.url is not None  # /metrics too answers only the copy's secret, as the gateway's scrape sends it
    text = httpx.get(copy.url + "/metrics", headers=copy_secret_header(copy.secret), timeout=5).text
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == "pier_http_requests_total" and sample.labels.get("route") == "/invocations")


def invoke(plane: Plane, payload: dict[str, object] = GENERATE) -> dict[str, object]:
    answer = client(plane.url).invoke_endpoint(EndpointName="llm", Body=json.dumps(payload),
                                               ContentType="application/json")
    return {"body": json.loads(answer["Body"].read()), "variant": answer["InvokedProductionVariant"]}


def test_the_router_sends_to_both_copies(plane: Plane) -> None:
    copies = [plane.running.status(c) for c in COPIES]
    before = [invocations_served(c) for c in copies]
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda i: invoke(plane, {"inputs": f"question {i}", "parameters": {
            "max_new_tokens": 8}}), range(8)))
    assert all(a["variant"] == "AllTraffic" for a in answers)
    after = [invocations_served(c) for c in copies]
    assert all(a > b for a, b in zip(after, before, strict=True)), (before, after)


def test_a_copys_client_error_is_a_model_error(plane: Plane) -> None:
    with pytest.raises(ClientError) as raised:
        invoke(plane, {"inputs": "the cat", "parameters": {"max_new_tokens": 0}})
    error = raised.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 424 and error["Error"]["Code"] == "ModelError"
    assert error["OriginalStatusCode"] == 422 and "max_new_tokens" in error["OriginalMessage"]
    assert error["LogStreamArn"].rsplit("/", 1)[1] in COPIES


def test_the_stream_route_frames_decode_with_botocore(plane: Plane) -> None:
    answer = client(plane.url).invoke_endpoint_with_response_stream(
        EndpointName="llm", Body=json.dumps({**GENERATE, "stream": True}), ContentType="application/json")
    text = b"".join(event["PayloadPart"]["Bytes"] for event in answer["Body"]).decode()
    events = [json.loads(line[len("data:"):]) for line in text.splitlines() if line.startswith("data:")]
    assert len(events) == 3 and events[-1]["generated_text"].startswith("the cat")


def test_generation_features_through_the_sagemaker_runtime(plane: Plane) -> None:
    """boto3's invoke_endpoint with TGI's grammar, best_of and details, and a chat with a JSON schema."""
    tgi = invoke(plane, {"inputs": "the cat", "parameters": {
        "grammar": {"type": "regex", "value": r"[a-z]{2,6} \d{2}"}, "best_of": 2, "do_sample": True,
        "details": True, "max_new_tokens": 20}})["body"]
    assert isinstance(tgi, list)
    generated = tgi[0]["generated_text"].removeprefix("the cat")
    assert re.fullmatch(r"[a-z]{2,6} \d{2}", generated), tgi
    assert len(tgi[0]["details"]["best_of_sequences"]) == 1
    assert all(isinstance(t["logprob"], float) for t in tgi[0]["details"]["tokens"])
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    chat = invoke(plane, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 30, "response_format": {
        "type": "json_schema", "json_schema": {"name": "ok", "schema": schema}}})["body"]
    assert isinstance(chat, dict)
    assert json.loads(chat["choices"][0]["message"]["content"]) in ({"ok": True}, {"ok": False})


def test_requests_keep_succeeding_while_a_killed_copy_restarts(plane: Plane) -> None:
    victim = plane.running.status("llm-1")
    assert victim.pid
    os.kill(victim.pid, signal.SIGKILL)
    plane.running.wait_for(lambda: plane.running.status("llm-1").state is not CopyState.READY, 5, "the kill")
    served = 0
    deadline = time.monotonic() + 60
    while plane.running.status("llm-1").state is not CopyState.READY or served < 3:
        invoke(plane)  # never an error: the dead copy refuses connections, or is not a candidate
        served += 1
        assert time.monotonic() < deadline, plane.running.status("llm-1")
    assert plane.running.status("llm-1").restarts == 1
    restarted = plane.running.status("llm-1")
    before = invocations_served(restarted)
    for _ in range(4):
        invoke(plane)
    assert invocations_served(restarted) > before  # back in the rotation
