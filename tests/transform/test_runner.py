"""JobRun's calls to copies: what each record's request tells the copy."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from pier.backends.base import CopyState, CopyStatus
from pier.channel.deadline import TIMEOUT_HEADER
from pier.control.shapes import ContainerSpec
from pier.transform.job import JobRecord, check
from pier.transform.records import Unit
from pier.transform.runner import JobRun
from pier.transform.store import ObjectRow
from pier.transform.turns import Turns

REQUEST: dict[str, Any] = {
    "TransformJobName": "j", "ModelName": "m",
    "TransformInput": {"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://b/in/"}}},
    "TransformOutput": {"S3OutputPath": "s3://b/out"},
    "TransformResources": {"InstanceType": "local", "InstanceCount": 1},
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def sent_headers(request: dict[str, Any]) -> httpx.Headers:
    seen: list[httpx.Request] = []

    def answer(sent: httpx.Request) -> httpx.Response:
        seen.append(sent)
        return httpx.Response(200, content=b"ok")

    job = JobRecord(name="j", arn="arn", created=0.0, modified=0.0, request=request,
                    container=ContainerSpec.model_validate({"Image": "pier"}))
    copy = CopyStatus("c0", "transform.j/AllTraffic", CopyState.READY, url="http://copy")
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        run = JobRun(job, check(request), store=None, turns=Turns(lambda: [copy]), client=client,  # type: ignore[arg-type]
                     senders=1)
        assert await run._invoke(ObjectRow("s3://b/in/a", "a", 0, 1, 1, False), Unit(0, (b"{}",)), b"{}") == b"ok"
    return seen[0].headers


@pytest.mark.anyio
async def test_the_copy_is_given_the_jobs_invocation_timeout_not_its_own_60_s() -> None:
    """A record may run for ModelClientConfig.InvocationsTimeoutInSeconds (600 s by default, as on AWS): the copy's
    SAGEMAKER_MODEL_SERVER_TIMEOUT (60 s) must not cut a long generation short."""
    assert (await sent_headers(REQUEST))[TIMEOUT_HEADER] == "600"
    given = {**REQUEST, "ModelClientConfig": {"InvocationsTimeoutInSeconds": 1800}}
    assert (await sent_headers(given))[TIMEOUT_HEADER] == "1800"
