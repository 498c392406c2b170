"""boto3 against a gateway with keys: the seeds' flow works with a created access key; unsigned, unknown,
wrong-secret, stale and tampered requests fail with AWS's error codes as botocore parses them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore import UNSIGNED
from botocore.exceptions import ClientError

from tests.security.conftest import GENERATE, Secured


def error_of(call: Any, **kwargs: Any) -> tuple[str, int, str]:
    with pytest.raises(ClientError) as raised:
        call(**kwargs)
    response = raised.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Message"]


def test_the_seed_flow_with_a_created_access_key(secured: Secured) -> None:
    secured.deploy("seed")
    runtime = secured.client("sagemaker-runtime", "invoker")
    reply = runtime.invoke_endpoint(EndpointName="seed", ContentType="application/json", Body=json.dumps(GENERATE))
    assert json.loads(reply["Body"].read())[0]["generated_text"]
    stream = runtime.invoke_endpoint_with_response_stream(
        EndpointName="seed", ContentType="application/json", Body=json.dumps({**GENERATE, "stream": True}))
    assert b"data:" in b"".join(event["PayloadPart"]["Bytes"] for event in stream["Body"])
    described = secured.client("sagemaker").describe_endpoint(EndpointName="seed")
    assert described["EndpointStatus"] == "InService"


@pytest.mark.parametrize("service", ["sagemaker", "sagemaker-runtime"])
def test_unsigned_requests_are_missing_a_token(secured: Secured, service: str) -> None:
    client = secured.client(service, signature_version=UNSIGNED)
    code, status, message = refused(client, service)
    assert (code, status) == ("MissingAuthenticationTokenException", 403)
    assert "pier keys create" in message


@pytest.mark.parametrize("service", ["sagemaker", "sagemaker-runtime"])
def test_a_wrong_secret_is_an_invalid_signature(secured: Secured, service: str) -> None:
    client = secured.client(service, secret="not-the-secret-at-all")
    code, status, message = refused(client, service)
    assert (code, status) == ("InvalidSignatureException", 403)
    assert message.startswith("The request signature we calculated does not match the signature you provided.")


@pytest.mark.parametrize("service", ["sagemaker", "sagemaker-runtime"])
def test_an_unknown_access_key_is_unrecognized(secured: Secured, service: str) -> None:
    client = secured.client(service, key_id="PIERAAAAAAAAAAAAAAAA")  # a key this gateway never issued
    code, status, message = refused(client, service)
    assert (code, status) == ("UnrecognizedClientException", 403)
    assert message.startswith("The security token included in the request is invalid.")


@pytest.mark.parametrize(("service", "skew"), [("sagemaker", -6), ("sagemaker-runtime", -6), ("sagemaker", 6)])
def test_a_stale_or_future_date_is_refused(secured: Secured, monkeypatch: pytest.MonkeyPatch, service: str,
                                           skew: int) -> None:
    client = secured.client(service)
    signed_at = datetime.now(UTC).replace(tzinfo=None) + timedelta(minutes=skew)
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda *a, **k: signed_at)  # the client's clock is off
    code, status, message = refused(client, service)
    assert (code, status) == ("InvalidSignatureException", 403)
    expected = "Signature expired:" if skew < 0 else "Signature not yet current:"
    assert message.startswith(expected) and signed_at.strftime("%Y%m%dT%H%M%SZ") in message


def test_a_date_within_the_five_minute_window_is_accepted(secured: Secured, monkeypatch: pytest.MonkeyPatch) -> None:
    client = secured.client("sagemaker")
    signed_at = datetime.now(UTC).replace(tzinfo=None) - timedelta(minutes=4)
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda *a, **k: signed_at)
    assert client.list_endpoints()["Endpoints"] == []


@pytest.mark.parametrize("service", ["sagemaker", "sagemaker-runtime"])
def test_a_body_changed_after_signing_is_refused(secured: Secured, service: str) -> None:
    client = secured.client(service)

    def tamper(request: Any, **_: Any) -> None:  # a man in the middle: same length, one byte changed
        request.body = request.body.replace(b"t", b"T", 1)

    client.meta.events.register("before-send", tamper)
    code, status, _ = refused(client, service)
    assert (code, status) == ("InvalidSignatureException", 403)


def test_an_invoke_key_cannot_create_a_model(secured: Secured) -> None:
    """Creating a model can run its code/inference.py or requirements.txt: admin only."""
    sagemaker = secured.client("sagemaker", "invoker")
    code, status, message = error_of(sagemaker.create_model, ModelName="trojan", PrimaryContainer={
        "ModelDataUrl": f"file://{secured.model_dir}"})
    assert (code, status) == ("AccessDeniedException", 400)
    assert "invoker" in message and "sagemaker:CreateModel" in message and "--role admin" in message
    assert secured.client("sagemaker").list_models()["Models"] == []


def test_an_invoke_key_reaches_no_control_plane_operation(secured: Secured) -> None:
    sagemaker = secured.client("sagemaker", "invoker")
    for call, kwargs in [(sagemaker.list_endpoints, {}), (sagemaker.delete_endpoint, {"EndpointName": "x"}),
                         (sagemaker.describe_model, {"ModelName": "x"})]:
        assert error_of(call, **kwargs)[:2] == ("AccessDeniedException", 400)


def test_a_limited_key_invokes_only_its_endpoints(secured: Secured) -> None:
    secured.deploy("allowed")
    secured.deploy("other")
    runtime = secured.client("sagemaker-runtime", "limited")
    body = json.dumps(GENERATE)
    assert runtime.invoke_endpoint(EndpointName="allowed", ContentType="application/json", Body=body)["Body"].read()
    code, status, message = error_of(runtime.invoke_endpoint, EndpointName="other", ContentType="application/json",
                                     Body=body)
    assert (code, status) == ("AccessDeniedException", 403)  # rest-json: 403
    assert "endpoint other" in message


def test_a_revoked_key_stops_working_without_a_restart(secured: Secured) -> None:
    from pier.security.keystore import KeyStore

    sagemaker = secured.client("sagemaker")
    assert sagemaker.list_endpoints()["Endpoints"] == []
    KeyStore.in_state_dir(secured.state_dir).revoke("admin")
    assert error_of(sagemaker.list_endpoints)[:2] == ("UnrecognizedClientException", 403)


def test_boto3s_default_retries_do_not_hide_an_expired_signature(secured: Secured,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """With boto3's default retry settings the refusal still surfaces (and is not retried into a success)."""
    import boto3

    key = secured.keys["admin"]
    client = boto3.client("sagemaker", endpoint_url=secured.url, region_name="us-east-1",
                          aws_access_key_id=key.stored.access_key_id, aws_secret_access_key=key.secret_access_key)
    signed_at = datetime.now(UTC).replace(tzinfo=None) - timedelta(minutes=30)
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda *a, **k: signed_at)
    assert error_of(client.list_endpoints)[0] == "InvalidSignatureException"


def refused(client: Any, service: str) -> tuple[str, int, str]:
    """The error of one representative call of the service (with a body, for tampering to change)."""
    if service == "sagemaker":
        return error_of(client.list_endpoints, NameContains="t")
    return error_of(client.invoke_endpoint, EndpointName="seed", ContentType="application/json",
                    Body=json.dumps(GENERATE))
