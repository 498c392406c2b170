"""InvokeEndpoint and InvokeEndpointWithResponseStream through the gateway's routes, driven by boto3, to
pier's real model server (over the fake engine) on loopback."""

from __future__ import annotations

import json
import re
import threading
import time

import httpx
import pytest
from botocore.exceptions import ClientError, EventStreamError
from fastapi import FastAPI, Request, Response

from pier.backends.base import CopyState, CopyStatus
from pier.runtime.routing_strategy import Routing, Strategy
from pier.runtime.settings import RuntimeSettings
from pier.runtime.target import Target
from tests.runtime.servers import (
    CopyServer,
    Gateway,
    SlowRunner,
    copy_server,
    echo_app,
    gateway,
    hanging_up_server,
    headers_of,
    serving,
    wait_until,
)
from tests.runtime.servers import runtime_client as client
from tests.sockets import free_port

GENERATE = {"inputs": "hello world", "parameters": {"max_new_tokens": 4}}


def error_of(raised: pytest.ExceptionInfo[ClientError]) -> tuple[int, str, dict[str, object]]:
    response = raised.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"], response


def test_invoke_endpoint_answers_like_sagemaker(gw: Gateway) -> None:
    answer = client(gw.url).invoke_endpoint(
        EndpointName="llm", Body=json.dumps(GENERATE), ContentType="application/json", Accept="application/json")
    assert answer["ContentType"] == "application/json"
    assert answer["InvokedProductionVariant"] == "AllTraffic"
    assert re.fullmatch(r"[0-9a-f-]{36}", answer["ResponseMetadata"]["RequestId"])
    [generated] = json.loads(answer["Body"].read())
    assert generated["generated_text"].startswith("hello world")


def test_a_copys_client_error_is_a_model_error_424(gw: Gateway) -> None:
    bad = {"inputs": "hello", "parameters": {"max_new_tokens": -5}}
    original = httpx.post(gw.targets["llm"].copies[0].url + "/invocations", json=bad)  # type: ignore[operator]
    with pytest.raises(ClientError) as raised:
        client(gw.url).invoke_endpoint(EndpointName="llm", Body=json.dumps(bad), ContentType="application/json")
    status, code, response = error_of(raised)
    assert (status, code) == (424, "ModelError")
    assert response["OriginalStatusCode"] == original.status_code == 422
    assert response["OriginalMessage"] == original.text
    assert response["Error"]["Message"].startswith(
        f'Received client error (422) from primary with message "{original.text}". See the log of copy llm-1')
    assert response["LogStreamArn"] == (
        "arn:aws:logs:us-east-1:000000000000:log-group:/aws/sagemaker/Endpoints/llm:log-stream:AllTraffic/llm-1")
    assert headers_of(response)["x-amzn-errortype"] == "ModelError"
    with pytest.raises(client(gw.url).exceptions.ModelError):  # boto3's modelled exception class
        client(gw.url).invoke_endpoint(EndpointName="llm", Body=json.dumps(bad))


@pytest.mark.parametrize(
    ("endpoint", "headers", "status", "code", "message"),
    [
        ("missing", {}, 400, "ValidationError", "Endpoint missing of account 000000000000 not found."),
        ("bad_name", {}, 400, "ValidationError", "Value 'bad_name' at 'endpointName' failed to satisfy constraint"),
        ("llm", {"X-Amzn-SageMaker-Custom-Attributes": "x" * 1025}, 400, "ValidationError", "customAttributes"),
        ("llm", {"X-Amzn-SageMaker-Inference-Component": "no_underscores"}, 400, "ValidationError",
         "inferenceComponentName"),
    ],
)
def test_requests_sagemaker_refuses(gw: Gateway, endpoint: str, headers: dict[str, str], status: int, code: str,
                                    message: str) -> None:
    answer = httpx.post(f"{gw.url}/endpoints/{endpoint}/invocations", json=GENERATE, headers=headers)
    assert (answer.status_code, answer.headers["x-amzn-ErrorType"]) == (status, code)
    assert message in answer.json()["message"]
    assert answer.headers["x-amzn-RequestId"]


def test_boto3_sees_validation_errors_by_their_code(gw: Gateway) -> None:
    with pytest.raises(ClientError) as raised:
        client(gw.url).invoke_endpoint(EndpointName="missing", Body=b"{}")
    assert error_of(raised)[:2] == (400, "ValidationError")
    assert raised.value.response["Error"]["Message"] == "Endpoint missing of account 000000000000 not found."


def test_a_payload_over_6_mib_is_refused_with_413(gw: Gateway) -> None:
    with pytest.raises(ClientError) as raised:
        client(gw.url).invoke_endpoint(EndpointName="llm", Body=b"x" * (6 * 1024 * 1024 + 1))
    status, code, response = error_of(raised)
    assert (status, code) == (413, "ValidationError") and "6291456 bytes" in response["Error"]["Message"]
    exactly = httpx.post(f"{gw.url}/endpoints/llm/invocations", content=b" " * (6 * 1024 * 1024))
    assert exactly.status_code == 424  # accepted by the gateway; the copy then refuses a blank body


@pytest.mark.parametrize(
    ("states", "status", "code", "words"),
    [
        ([], 503, "ServiceUnavailable", "has no copies"),
        ([CopyState.STARTING, CopyState.RESTARTING], 429, "ModelNotReadyException", "still loading"),
        ([CopyState.RESTARTING, CopyState.FAILED], 503, "ServiceUnavailable", "is ready"),
    ],
)
def test_no_ready_copy(gw: Gateway, states: list[CopyState], status: int, code: str, words: str) -> None:
    gw.route("llm", [CopyStatus(f"c{i}", "ic", state, message="why") for i, state in enumerate(states)])
    with pytest.raises(ClientError) as raised:
        client(gw.url).invoke_endpoint(EndpointName="llm", Body=json.dumps(GENERATE))
    assert error_of(raised)[:2] == (status, code)
    assert words in raised.value.response["Error"]["Message"]


def test_a_copy_that_refuses_connections_is_skipped_for_another(gw: Gateway, copy: CopyServer) -> None:
    dead = CopyStatus("dead", "ic", CopyState.READY, url=f"http://127.0.0.1:{free_port()}", pid=2)
    gw.route("llm", [dead, copy.status("live")])
    for _ in range(4):  # the chooser alternates, so the dead copy is tried first at least once
        client(gw.url).invoke_endpoint(EndpointName="llm", Body=json.dumps(GENERATE))
    gw.route("llm", [dead])
    with pytest.raises(ClientError) as raised:
        client(gw.url).invoke_endpoint(EndpointName="llm", Body=json.dumps(GENERATE))
    assert error_of(raised)[:2] == (503, "ServiceUnavailable")
    assert "tried dead" in raised.value.response["Error"]["Message"]


def test_a_copy_shutting_down_passes_its_requests_to_another() -> None:
    with copy_server() as leaving, copy_server() as staying, gateway() as gw:
        leaving.shut_down()
        # "a-..." sorts first, so the chooser tries the copy that is shutting down first.
        gw.route("llm", [leaving.status("a-leaving"), staying.status("b-staying")])
        for _ in range(3):
            answer = client(gw.url).invoke_endpoint(EndpointName="llm", Body=json.dumps(GENERATE))
            assert json.loads(answer["Body"].read())[0]["generated_text"]
            streamed = client(gw.url).invoke_endpoint_with_response_stream(
                EndpointName="llm", Body=json.dumps({**GENERATE, "stream": True}))
            assert b"".join(e["PayloadPart"]["Bytes"] for e in streamed["Body"])
        assert leaving.engine.stats().prompt_tokens == 0 and staying.engine.stats().prompt_tokens > 0
        gw.route("llm", [leaving.status("a-leaving")])  # the last copy: its refusal is the answer, as before
        with pytest.raises(ClientError) as raised:
            client(gw.url).invoke_endpoint(EndpointName="llm", Body=json.dumps(GENERATE))
        status, code, response = error_of(raised)
        assert (status, code, response["OriginalStatusCode"]) == (424, "ModelError", 503)
        assert "shutting down" in response["OriginalMessage"]


def test_stream_route_frames_decode_with_botocore(gw: Gateway, copy: CopyServer) -> None:
    body = {**GENERATE, "stream": True}
    direct = httpx.post(copy.url + "/invocations", json=body).text
    answer = client(gw.url).invoke_endpoint_with_response_stream(
        EndpointName="llm", Body=json.dumps(body), ContentType="application/json", Accept="text/event-stream")
    assert answer["ContentType"].startswith("text/event-stream")
    assert answer["InvokedProductionVariant"] == "AllTraffic"
    streamed = b"".join(event["PayloadPart"]["Bytes"] for event in answer["Body"])
    assert streamed.decode() == direct  # greedy and deterministic: the same bytes, however they were cut
    events = [line for line in streamed.decode().splitlines() if line.startswith("data:")]
    assert len(events) == 4


def test_stream_route_maps_a_copys_error_before_the_200(gw: Gateway) -> None:
    bad = {"inputs": "hello", "parameters": {"max_new_tokens": -5}, "stream": True}
    with pytest.raises(ClientError) as raised:
        client(gw.url).invoke_endpoint_with_response_stream(EndpointName="llm", Body=json.dumps(bad))
    status, code, response = error_of(raised)
    assert (status, code, response["OriginalStatusCode"]) == (424, "ModelError", 422)


def test_stream_route_sends_the_accept_header_to_the_copy(gw: Gateway) -> None:
    raw = httpx.post(f"{gw.url}/endpoints/llm/invocations-response-stream", json={**GENERATE, "stream": True},
                     headers={"X-Amzn-SageMaker-Accept": "text/event-stream"})
    assert raw.status_code == 200
    assert raw.headers["content-type"] == "application/vnd.amazon.eventstream"
    assert raw.headers["x-amzn-sagemaker-content-type"].startswith("text/event-stream")
    assert raw.headers["x-amzn-requestid"]


def test_a_generation_past_the_deadline_ends_with_424_and_stops_on_the_copy() -> None:
    with copy_server(SlowRunner(0.05)) as slow, gateway(RuntimeSettings(deadline_s=1.0)) as gw:
        gw.route("llm", [slow.status("slow-1")])
        started = time.monotonic()
        long = {"inputs": "hello", "parameters": {"max_new_tokens": 500}}
        with pytest.raises(ClientError) as raised:
            client(gw.url).invoke_endpoint(EndpointName="llm", Body=json.dumps(long))
        assert time.monotonic() - started < 3
        status, code, response = error_of(raised)
        assert (status, code, response["OriginalStatusCode"]) == (424, "ModelError", 0)
        assert "did not answer within 1.0 s" in response["Error"]["Message"]
        assert wait_idle(slow)


def test_a_stream_past_its_total_bound_ends_with_a_model_stream_error() -> None:
    settings = RuntimeSettings(deadline_s=1.0, stream_total_s=1.0)  # flowing, it is cut by the total bound only
    with copy_server(SlowRunner(0.05)) as slow, gateway(settings) as gw:
        gw.route("llm", [slow.status("slow-1")])
        long = {"inputs": "hello", "parameters": {"max_new_tokens": 500}, "stream": True}
        answer = client(gw.url).invoke_endpoint_with_response_stream(EndpointName="llm", Body=json.dumps(long))
        parts = []
        with pytest.raises(EventStreamError) as raised:
            for event in answer["Body"]:
                parts.append(event["PayloadPart"]["Bytes"])
        assert parts, "tokens streamed before the deadline"
        assert raised.value.response["Error"]["Code"] == "ModelStreamError"
        assert "still running after 1.0 s" in raised.value.response["Error"]["Message"]
        assert wait_idle(slow)


def test_a_client_that_hangs_up_stops_the_generation() -> None:
    with copy_server(SlowRunner(0.05)) as slow, gateway() as gw:
        gw.route("llm", [slow.status("slow-1")])
        long = {"inputs": "hello", "parameters": {"max_new_tokens": 1000}}
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{gw.url}/endpoints/llm/invocations", json=long, timeout=0.5)
        assert wait_idle(slow)
        with httpx.stream("POST", f"{gw.url}/endpoints/llm/invocations-response-stream",
                          json={**long, "stream": True}) as streaming:
            next(streaming.iter_raw())
        assert wait_idle(slow)
        # The gateway lets go of the copy as it closes the upstream request, which may end just after the copy
        # has stopped.
        assert wait_until(lambda: gw.service.forwarder.admission.in_use("ic") == 0)
        assert gw.service.forwarder.chooser("ic").outstanding("slow-1") == 0


def test_throttling_when_the_queue_is_full() -> None:
    settings = RuntimeSettings(per_copy_concurrency=1, queue=0)
    with copy_server(SlowRunner(0.02)) as slow, gateway(settings) as gw:
        gw.route("llm", [slow.status("slow-1")])
        long = json.dumps({"inputs": "hello", "parameters": {"max_new_tokens": 50}})
        running = threading.Thread(target=lambda: client(gw.url).invoke_endpoint(EndpointName="llm", Body=long))
        running.start()
        assert wait_until_busy(gw)
        with pytest.raises(ClientError) as raised:
            client(gw.url).invoke_endpoint(EndpointName="llm", Body=long)
        status, code, response = error_of(raised)
        assert (status, code) == (429, "ThrottlingException")  # HTTP 429, as the issue asks (was 400)
        assert headers_of(response)["retry-after"] == "1"
        assert "is busy" in response["Error"]["Message"]
        running.join(30)
        client(gw.url, attempts=3).invoke_endpoint(EndpointName="llm", Body=long)  # free again


def wait_idle(copy: CopyServer, timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stats = copy.engine.stats()
        if stats.running == 0 and stats.waiting == 0:
            return True
        time.sleep(0.02)
    return False


def wait_until_busy(gw: Gateway, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if gw.service.forwarder.admission.in_use("ic") > 0:
            return True
        time.sleep(0.01)
    return False


def test_headers_go_to_the_copy_and_custom_attributes_come_back() -> None:
    seen: list[dict[str, object]] = []
    with serving(echo_app(seen)) as url, gateway() as gw:
        gw.route("echo", [CopyStatus("e1", "echo-ic", CopyState.READY, url=url)], component="echo-ic", variant="blue")
        answer = client(gw.url).invoke_endpoint(
            EndpointName="echo", Body=b"a,b\n1,2\n", ContentType="text/csv", Accept="text/csv",
            CustomAttributes="trace=42", InferenceId="inf-1", InferenceComponentName="echo-ic")
        assert answer["Body"].read() == b"a,b\n1,2\n"
        assert answer["ContentType"] == "text/csv"  # exactly as the copy wrote it
        assert answer["CustomAttributes"] == "echo trace=42"
        assert answer["InvokedProductionVariant"] == "blue"
        sent = seen[0]["headers"]
        assert isinstance(sent, dict)
        assert sent["content-type"] == "text/csv" and sent["accept"] == "text/csv"
        assert sent["x-amzn-sagemaker-custom-attributes"] == "trace=42"
        assert sent["x-amzn-sagemaker-inference-id"] == "inf-1"
        assert sent["x-amzn-requestid"] == answer["ResponseMetadata"]["RequestId"]
        streamed = client(gw.url).invoke_endpoint_with_response_stream(
            EndpointName="echo", Body=b"x", Accept="text/plain", CustomAttributes="s=1")
        assert streamed["CustomAttributes"] == "echo s=1"
        assert b"".join(e["PayloadPart"]["Bytes"] for e in streamed["Body"]) == b"x"
        assert seen[-1]["headers"]["accept"] == "text/plain"  # type: ignore[index]


def test_a_file_the_target_names_is_sent_as_each_copy_reads_it() -> None:
    """An adapter's GGUF is a file on the gateway's host: each copy is told where it reads it (Backend.path_on: on
    another Ray node, its node's copy), and a copy that cannot get it is passed over for one that can."""
    seen: list[dict[str, object]] = []
    asked: list[tuple[str, str]] = []

    async def path_on(copy_id: str, path: str) -> str:
        asked.append((copy_id, path))
        if copy_id == "a-lost":
            raise RuntimeError("its node is gone")
        return f"/nodes/{copy_id}{path}"

    with serving(echo_app(seen)) as url, gateway() as gw:
        gw.service.forwarder.path_on = path_on
        # "a-..." sorts first, so the chooser tries it first
        copies = [CopyStatus(c, "ic", CopyState.READY, url=url) for c in ("a-lost", "b-node")]
        gw.targets["lora"] = Target(copies, "ic", headers={"X-Pier-Adapter": "lora"},
                                    files={"X-Pier-Adapter-File": "/store/lora/adapter.gguf"})
        answer = client(gw.url).invoke_endpoint(EndpointName="lora", Body=b"hi")
        assert answer["Body"].read() == b"hi"
        (sent,) = [s["headers"] for s in seen]
        assert isinstance(sent, dict)
        assert sent["x-pier-adapter"] == "lora"
        assert sent["x-pier-adapter-file"] == "/nodes/b-node/store/lora/adapter.gguf"
        assert asked == [("a-lost", "/store/lora/adapter.gguf"), ("b-node", "/store/lora/adapter.gguf")]


def test_a_cookie_a_copy_sets_never_rides_on_another_request() -> None:
    """A bring-your-own handler may answer with Set-Cookie; the gateway's one client to every copy keeps no cookie,
    so one client's never reaches the copy with another's request."""
    received: list[str | None] = []
    app = FastAPI()

    @app.post("/invocations")
    async def invocations(request: Request) -> Response:
        received.append(request.headers.get("cookie"))
        return Response(b"ok", headers={"Set-Cookie": "session=user-a; Path=/"})

    with serving(app) as url, gateway() as gw:
        gw.route("byoc", [CopyStatus("b1", "ic", CopyState.READY, url=url)])
        for _ in range(3):
            assert client(gw.url).invoke_endpoint(EndpointName="byoc", Body=b"x")["Body"].read() == b"ok"
    assert received == [None, None, None]


def test_a_request_that_reached_a_copy_is_never_sent_again(copy: CopyServer) -> None:
    with hanging_up_server() as (url, received), gateway() as gw:
        # "a-..." sorts first, so the chooser tries it first.
        gw.route("llm", [CopyStatus("a-crashing", "ic", CopyState.READY, url=url), copy.status("b-live")])
        before = copy.engine.stats().prompt_tokens
        with pytest.raises(ClientError) as raised:
            client(gw.url).invoke_endpoint(EndpointName="llm", Body=json.dumps(GENERATE))
        status, code, response = error_of(raised)
        assert (status, code, response["OriginalStatusCode"]) == (424, "ModelError", 0)
        assert "connection to copy a-crashing broke" in response["Error"]["Message"]
        assert len(received) == 1 and copy.engine.stats().prompt_tokens == before


def test_a_stream_whose_copy_crashes_ends_with_stream_broken() -> None:
    with serving(echo_app([])) as url, gateway() as gw:
        gw.route("echo", [CopyStatus("e1", "ic", CopyState.READY, url=url)])
        answer = client(gw.url).invoke_endpoint_with_response_stream(EndpointName="echo", Body=b"break-stream")
        events = iter(answer["Body"])
        assert next(events) == {"PayloadPart": {"Bytes": b"data: first\n\n"}}
        with pytest.raises(EventStreamError) as raised:
            next(events)
        assert raised.value.response["Error"]["Code"] == "ModelStreamError"
        assert "connection to copy e1 broke" in raised.value.response["Error"]["Message"]


def test_a_client_that_hangs_up_while_queued_leaves_the_queue() -> None:
    settings = RuntimeSettings(per_copy_concurrency=1, queue=4)
    with copy_server(SlowRunner(0.02)) as slow, gateway(settings) as gw:
        gw.route("llm", [slow.status("slow-1")])
        long = json.dumps({"inputs": "hello", "parameters": {"max_new_tokens": 60}})
        running = threading.Thread(target=lambda: client(gw.url).invoke_endpoint(EndpointName="llm", Body=long))
        running.start()
        assert wait_until_busy(gw)
        admission = gw.service.forwarder.admission
        for route in ("invocations", "invocations-response-stream"):
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(f"{gw.url}/endpoints/llm/{route}", content=long, timeout=0.3)
            assert wait_until(lambda: admission.waiting("ic") == 0), route
        running.join(30)
        assert admission.in_use("ic") == 0


def test_tgi_tool_calls_through_invoke_endpoint(gw: Gateway, copy: CopyServer) -> None:
    """TGI's Messages API with tools, as the SageMaker SDK's HuggingFace predictors send it, through boto3."""
    tool = {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"]}}}
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": [tool], "max_tokens": 100, "temperature": 0,
            "tool_choice": {"function": {"name": "get_time"}}}
    answer = json.loads(client(gw.url).invoke_endpoint(EndpointName="llm", Body=json.dumps(body))["Body"].read())
    [call] = answer["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "get_time" and call["function"]["arguments"]["zone"] in ("UTC", "CET")
    streamed = client(gw.url).invoke_endpoint_with_response_stream(EndpointName="llm",
                                                                   Body=json.dumps({**body, "stream": True}))
    text = b"".join(e["PayloadPart"]["Bytes"] for e in streamed["Body"]).decode()
    chunks = [json.loads(line[len("data:"):]) for line in text.splitlines() if line.startswith("data:")]
    arguments = "".join(c["choices"][0]["delta"]["tool_calls"]["function"]["arguments"] for c in chunks
                        if "tool_calls" in c["choices"][0]["delta"])
    assert json.loads(arguments) == call["function"]["arguments"]
    with pytest.raises(ClientError) as raised:
        client(gw.url).invoke_endpoint(EndpointName="llm", Body=json.dumps({**body, "tool_choice": "sometimes"}))
    status, code, response = error_of(raised)
    assert (status, code, response["OriginalStatusCode"]) == (424, "ModelError", 422)


def test_prefix_aware_id_is_checked_and_sets_routes_apart() -> None:
    """boto3's PrefixAwareId on a PREFIX_AWARE variant: one body under many ids reaches both copies (each id its
    own home copy), under none always the same copy; a value botocore's model forbids is SageMaker's
    ValidationError."""
    seen: dict[str, list[dict[str, object]]] = {"a": [], "b": []}
    routing = Routing(Strategy.PREFIX_AWARE, prefix_length=1024, concurrency_threshold=100)
    with serving(echo_app(seen["a"])) as url_a, serving(echo_app(seen["b"])) as url_b, gateway() as gw:
        copies = [CopyStatus("a", "ic", CopyState.READY, url_a), CopyStatus("b", "ic", CopyState.READY, url_b)]
        gw.targets["llm"] = Target(copies, "ic", "AllTraffic", routing)
        runtime = client(gw.url)
        for _ in range(4):
            runtime.invoke_endpoint(EndpointName="llm", Body=b'{"inputs": "shared"}')
        assert sorted(len(requests) for requests in seen.values()) == [0, 4]
        for index in range(16):
            runtime.invoke_endpoint(EndpointName="llm", Body=b'{"inputs": "shared"}', PrefixAwareId=f"app-{index}")
        assert all(requests for requests in seen.values())  # 16 ids all on one copy: 1 in 32,768
        with pytest.raises(ClientError) as raised:
            runtime.invoke_endpoint(EndpointName="llm", Body=b"{}", PrefixAwareId="x" * 65)
        assert error_of(raised)[:2] == (400, "ValidationError")
        assert "at 'prefixAwareId' failed to satisfy constraint: Member must have length less than or equal to 64" \
            in raised.value.response["Error"]["Message"]
