"""Signing pier's own HTTP calls (the CLI's /pier/copies, logs and chat) with SigV4, as boto3 signs the
SageMaker calls: one credential for every route of the gateway."""

from __future__ import annotations

from collections.abc import Generator

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

REGION = "us-east-1"
SERVICE = "sagemaker"


class SigV4Signer(httpx.Auth):
    requires_request_body = True  # the signature covers the body

    def __init__(self, access_key_id: str, secret_access_key: str, *, region: str = REGION,
                 service: str = SERVICE) -> None:
        self._credentials = Credentials(access_key_id, secret_access_key)
        self._region = region
        self._service = service

    def __repr__(self) -> str:
        return f"SigV4Signer({self._credentials.access_key!r}, <secret>)"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        signed = AWSRequest(method=request.method, url=str(request.url), data=request.content,
                            headers={"host": request.headers["host"]})
        SigV4Auth(self._credentials, self._service, self._region).add_auth(signed)
        for name in ("Authorization", "X-Amz-Date"):
            request.headers[name] = signed.headers[name]
        yield request
