"""Stateful sessions: the gateway's table of them (pure, with a clock), and InvokeEndpoint's SessionId through
the gateway with boto3, on two copies that say which of them answered."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from pier.backends.base import CopyState, CopyStatus
from pier.runtime.errors import InvalidInvocation
from pier.runtime.sessions import Session, Sessions, request_type
from tests.runtime.servers import Gateway, echo_app, gateway, serving
from tests.runtime.servers import runtime_client as client

HEADER = re.compile(r"([0-9a-f]{32}); Expires=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_is_found_until_it_expires() -> None:
    clock = Clock()
    sessions = Sessions(ttl_s=60, clock=clock)
    opened = sessions.open("llm", "ic", "a")
    assert sessions.find(opened.id, "LLM") is opened  # endpoint names are case-insensitive, as SageMaker's
    clock.now += 59.9
    assert sessions.find(opened.id, "llm") is opened
    clock.now += 0.1
    with pytest.raises(InvalidInvocation, match=f"Session {opened.id} is not open on endpoint llm"):
        sessions.find(opened.id, "llm")
    assert len(sessions) == 0


@pytest.mark.parametrize(("session_id", "endpoint"), [("nope", "llm"), (None, "other")])
def test_unknown_ids_and_other_endpoints_are_refused(session_id: str | None, endpoint: str) -> None:
    sessions = Sessions()
    opened = sessions.open("llm", "ic", "a")
    with pytest.raises(InvalidInvocation, match="Open a new one with SessionId=NEW_SESSION"):
        sessions.find(session_id or opened.id, endpoint)


def test_the_least_recently_used_sessions_go_past_the_limit() -> None:
    sessions = Sessions(limit=2)
    first, second = sessions.open("e", "ic", "a"), sessions.open("e", "ic", "a")
    sessions.find(first.id, "e")  # used: second is now the least recent
    sessions.open("e", "ic", "b")
    assert sessions.find(first.id, "e") is first
    with pytest.raises(InvalidInvocation):
        sessions.find(second.id, "e")


def test_closing() -> None:
    sessions = Sessions()
    opened = sessions.open("e", "ic", "a")
    assert sessions.close(opened.id) and not sessions.close(opened.id)


def test_the_header_reads_as_sagemakers() -> None:
    assert Session("abc", "e", "ic", "a", 1_700_000_000.0).header() == "abc; Expires=2023-11-14T22:13:20Z"


@pytest.mark.parametrize(("body", "expected"), [
    (b'{"requestType": "NEW_SESSION"}', "NEW_SESSION"), (b'{"requestType":"CLOSE"}', "CLOSE"),
    (b'{"requestType": "OTHER"}', None), (b'{"requestType": "CLOSE", "inputs": "x"}', None),
    (b'{"inputs": "x"}', None), (b"CLOSE", None), (b"{", None), (b"[]", None),
])
def test_request_type(body: bytes, expected: str | None) -> None:
    assert request_type(body) == expected


# ---- through the gateway


@pytest.fixture
def two() -> Iterator[tuple[Gateway, dict[str, list[dict[str, Any]]]]]:
    seen: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
    with serving(echo_app(seen["a"])) as url_a, serving(echo_app(seen["b"])) as url_b, gateway() as gw:
        gw.route("llm", [CopyStatus("a", "ic", CopyState.READY, url_a), CopyStatus("b", "ic", CopyState.READY, url_b)])
        yield gw, seen


def invoke(gw: Gateway, body: object, **extra: Any) -> dict[str, Any]:
    answer: dict[str, Any] = client(gw.url).invoke_endpoint(EndpointName="llm", Body=json.dumps(body),
                                                            ContentType="application/json", **extra)
    return answer


def served_by(seen: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
    return {copy_id: len(requests) for copy_id, requests in seen.items()}


def test_a_sessions_calls_all_go_to_its_copy(two: tuple[Gateway, dict[str, list[dict[str, Any]]]]) -> None:
    gw, seen = two
    opened = invoke(gw, {"inputs": "turn 1"}, SessionId="NEW_SESSION")
    match = HEADER.fullmatch(opened["NewSessionId"])
    assert match is not None, opened["NewSessionId"]
    session_id = match.group(1)
    home = next(copy_id for copy_id, requests in seen.items() if requests)
    for turn in range(2, 8):
        assert json.loads(invoke(gw, {"inputs": f"turn {turn}"}, SessionId=session_id)["Body"].read()) == {
            "inputs": f"turn {turn}"}
    assert served_by(seen)[home] == 7  # without the session, least outstanding would alternate the copies
    assert seen[home][-1]["headers"]["x-amzn-sagemaker-session-id"] == session_id
    stream = client(gw.url).invoke_endpoint_with_response_stream(
        EndpointName="llm", Body=b'{"inputs": "streamed"}', ContentType="application/json", SessionId=session_id)
    assert b"".join(e["PayloadPart"]["Bytes"] for e in stream["Body"]) == b'{"inputs": "streamed"}'
    assert served_by(seen)[home] == 8


def test_the_toolkits_session_requests_are_answered_by_the_gateway(
        two: tuple[Gateway, dict[str, list[dict[str, Any]]]]) -> None:
    gw, seen = two
    opened = invoke(gw, {"requestType": "NEW_SESSION"}, SessionId="NEW_SESSION")
    assert json.loads(opened["Body"].read()) == {} and HEADER.fullmatch(opened["NewSessionId"])
    session_id = opened["NewSessionId"].split(";")[0]
    invoke(gw, {"inputs": "x"}, SessionId=session_id)
    closed = invoke(gw, {"requestType": "CLOSE"}, SessionId=session_id)
    assert closed["ClosedSessionId"] == session_id and json.loads(closed["Body"].read()) == {}
    assert sum(served_by(seen).values()) == 1  # only the generation reached a copy
    with pytest.raises(ClientError) as raised:
        invoke(gw, {"inputs": "after"}, SessionId=session_id)
    error = raised.value.response
    assert (error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Code"]) == (400, "ValidationError")
    assert f"Session {session_id} is not open on endpoint llm" in error["Error"]["Message"]


def test_a_session_whose_copy_is_gone_moves_to_another(two: tuple[Gateway, dict[str, list[dict[str, Any]]]]) -> None:
    gw, seen = two
    session_id = invoke(gw, {"inputs": "1"}, SessionId="NEW_SESSION")["NewSessionId"].split(";")[0]
    home = next(copy_id for copy_id, requests in seen.items() if requests)
    other = "b" if home == "a" else "a"
    both = list(gw.targets["llm"].copies)
    gw.route("llm", [c for c in both if c.copy_id == other])  # the session's copy stopped
    invoke(gw, {"inputs": "2"}, SessionId=session_id)
    gw.route("llm", both)  # back (a replacement): the session stays on its new copy
    invoke(gw, {"inputs": "3"}, SessionId=session_id)
    assert served_by(seen) == {home: 1, other: 2}


def test_a_close_on_the_streaming_route_closes_the_session_too(
        two: tuple[Gateway, dict[str, list[dict[str, Any]]]]) -> None:
    """The container standard's session requests come to /invocations from either runtime call: a CLOSE streamed is
    a CLOSE, answered by the gateway as one part, not a payload the model cannot read (a 424 before)."""
    gw, seen = two
    session_id = invoke(gw, {"requestType": "NEW_SESSION"}, SessionId="NEW_SESSION")["NewSessionId"].split(";")[0]
    stream = client(gw.url).invoke_endpoint_with_response_stream(
        EndpointName="llm", Body=b'{"requestType": "CLOSE"}', ContentType="application/json", SessionId=session_id)
    assert [json.loads(e["PayloadPart"]["Bytes"]) for e in stream["Body"]] == [{}]
    assert sum(served_by(seen).values()) == 0
    with pytest.raises(ClientError) as raised:
        invoke(gw, {"inputs": "after"}, SessionId=session_id)
    assert f"Session {session_id} is not open" in raised.value.response["Error"]["Message"]


def test_a_close_of_new_session_opens_none(two: tuple[Gateway, dict[str, list[dict[str, Any]]]]) -> None:
    """CLOSE names the session it closes: with SessionId=NEW_SESSION there is none, and no session is opened (one
    was, before); the container standard refuses it too ("session not found: NEW_SESSION")."""
    gw, seen = two
    with pytest.raises(ClientError) as raised:
        invoke(gw, {"requestType": "CLOSE"}, SessionId="NEW_SESSION")
    error = raised.value.response
    assert (error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Code"]) == (400, "ValidationError")
    assert "SessionId" in error["Error"]["Message"] and "NewSessionId" not in raised.value.response
    assert len(gw.service.sessions) == 0 and sum(served_by(seen).values()) == 0
