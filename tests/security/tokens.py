"""Credentials made the way AWS's tools make them, with botocore, for tests to present."""

from __future__ import annotations

import base64
from datetime import datetime
from unittest import mock

from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


def sagemaker_api_key(key_id: str, secret: str, *, region: str = "us-east-1", expires_s: int = 43200,
                      signed_at: datetime | None = None) -> str:
    """What the sagemaker SDK's token generator (sagemaker-core's `generate_token`) returns: the base64 of a
    presigned POST https://sagemaker.amazonaws.com/?Action=CallWithBearerToken, with &Version=1 appended.
    The installed SDK (2.x) has no generator, so this follows it step by step."""
    request = AWSRequest(method="POST", url="https://sagemaker.amazonaws.com/",
                         headers={"host": "sagemaker.amazonaws.com"}, params={"Action": "CallWithBearerToken"})
    with _clock(signed_at):
        SigV4QueryAuth(Credentials(key_id, secret), "sagemaker", region, expires=expires_s).add_auth(request)
    presigned = request.url.replace("https://", "") + "&Version=1"
    return "sagemaker-api-key-" + base64.b64encode(presigned.encode()).decode()


def presigned_url(url: str, key_id: str, secret: str, *, method: str = "GET", expires_s: int = 300,
                  signed_at: datetime | None = None) -> str:
    """A SigV4 presigned URL (the signature in the query string), as botocore's presigner makes one."""
    host = url.split("://", 1)[1].split("/", 1)[0]
    request = AWSRequest(method=method, url=url, headers={"host": host})
    with _clock(signed_at):
        SigV4QueryAuth(Credentials(key_id, secret), "sagemaker", "us-east-1", expires=expires_s).add_auth(request)
    return str(request.url)


def _clock(signed_at: datetime | None) -> mock._patch[object] | _Nothing:
    if signed_at is None:
        return _Nothing()
    return mock.patch("botocore.auth.get_current_datetime", lambda *a, **k: signed_at)


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
