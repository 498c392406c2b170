"""JobRun's calls to copies: what each record's request tells the copy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from pier.backends.base import CopyState, CopyStatus
from pier.channel.copy_secret import copy_secret_header
from pier.channel.headers import TIMEOUT_HEADER
from pier.control.shapes import ContainerSpec
from pier.runtime.attempts import Forwarder
from pier.runtime.settings import RuntimeSettings
from pier.transform.job import JobRecord, check
from pier.transform.job_run import JobFailed, JobRun
from pier.transform.transform_store import ObjectRow
from pier.transform.turns import Turns
from pier.transform.units import Unit

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
    copy = CopyStatus("c0", "transform.j/AllTraffic", CopyState.READY, url="http://copy", secret="s3cret")
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        run = JobRun(job, check(request), store=None, turns=Turns(lambda: [copy]),  # type: ignore[arg-type]
                     forwarder=Forwarder(RuntimeSettings(), client), senders=1)
        assert await run._invoke(ObjectRow("s3://b/in/a", "a", 0, 1, 1, False), Unit(0, (b"{}",)), b"{}") == b"ok"
    return seen[0].headers


@pytest.mark.anyio
async def test_the_copy_is_given_the_jobs_invocation_timeout_not_its_own_60_s() -> None:
    """A record may run for ModelClientConfig.InvocationsTimeoutInSeconds (600 s by default, as on AWS): the copy's
    SAGEMAKER_MODEL_SERVER_TIMEOUT (60 s) must not cut a long generation short."""
    assert (await sent_headers(REQUEST))[TIMEOUT_HEADER] == "600"
    given = {**REQUEST, "ModelClientConfig": {"InvocationsTimeoutInSeconds": 1800}}
    assert (await sent_headers(given))[TIMEOUT_HEADER] == "1800"


@pytest.mark.anyio
async def test_the_copy_is_given_its_secret() -> None:
    headers = await sent_headers(REQUEST)
    assert all(headers.get(name) == value for name, value in copy_secret_header("s3cret").items())


async def failure(request: dict[str, Any], unit: Unit, status: int = 422) -> str:
    """Why the job fails when the copy refuses `unit` (422, as pier's model server refuses JSON lines)."""
    job = JobRecord(name="j", arn="arn", created=0.0, modified=0.0, request=request,
                    container=ContainerSpec.model_validate({"Image": "pier"}))
    copy = CopyStatus("c0", "transform.j/AllTraffic", CopyState.READY, url="http://copy")
    refuse = httpx.MockTransport(lambda _: httpx.Response(status, text='{"error": "not valid JSON (Extra data)"}'))
    async with httpx.AsyncClient(transport=refuse) as client:
        run = JobRun(job, check(request), store=None, turns=Turns(lambda: [copy]),  # type: ignore[arg-type]
                     forwarder=Forwarder(RuntimeSettings(), client), senders=1)
        with pytest.raises(JobFailed) as failed:
            await run._invoke(ObjectRow("s3://b/in/a", "a", 0, 1, 2, False), unit, unit.body)
    return str(failed.value)


@pytest.mark.anyio
async def test_a_refused_mini_batch_says_to_send_single_records() -> None:
    reason = await failure({**REQUEST, "BatchStrategy": "MultiRecord",
                            "TransformInput": {**REQUEST["TransformInput"], "SplitType": "Line"}},
                           Unit(0, (b"{}", b"{}")))
    assert "the model answered 422" in reason and "joined 2 records" in reason and "SingleRecord" in reason


@pytest.mark.anyio
async def test_a_refused_whole_object_of_lines_says_to_split_by_line() -> None:
    reason = await failure(REQUEST, Unit(0, (b"{}\n{}\n",)))
    assert "the model answered 422" in reason and "SplitType Line" in reason


@pytest.mark.anyio
async def test_a_refused_single_record_has_no_hint() -> None:
    reason = await failure(REQUEST, Unit(0, (b"{}",)))
    assert "SplitType" not in reason and "SingleRecord" not in reason


@pytest.mark.anyio
async def test_a_copy_that_keeps_failing_a_record_fails_the_job_once_its_retries_are_spent() -> None:
    """InvocationsMaxRetries is the record's budget in the runtime's attempt loop: 1 retry, so 2 tries."""
    reason = await failure({**REQUEST, "ModelClientConfig": {"InvocationsMaxRetries": 1}}, Unit(0, (b"{}",)), 500)
    assert reason.startswith("a, unit 1 failed 2 times; last: the model answered 500: ")


@pytest.mark.anyio
async def test_a_percent_encoded_key_fails_the_job_before_anything_is_written(tmp_path: Path) -> None:
    """Issue 41: s3://b/pin/%2e%2e/%2e%2e/x.jsonl under S3Prefix s3://b/pin/ with a file:// S3OutputPath wrote
    x.jsonl.out two folders above the output folder. Now the job fails, saying why, before a record is sent.
    (Bucket 'batch': S3 and moto take no one-letter bucket name.)"""
    moto = pytest.importorskip("moto")
    import boto3

    from pier import storage as shared
    from pier.transform.transform_store import TransformStore

    output = tmp_path / "srv" / "out" / "job"
    request = {**REQUEST, "TransformInput": {"DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": "s3://batch/pin/"}}}, "TransformOutput": {"S3OutputPath": output.as_uri()}}
    job = JobRecord(name="j", arn="arn", created=0.0, modified=0.0, request=request,
                    container=ContainerSpec.model_validate({"Image": "pier"}))
    copy = CopyStatus("c0", "transform.j/AllTraffic", CopyState.READY, url="http://copy")
    sent: list[httpx.Request] = []
    with moto.mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="batch")
        s3.put_object(Bucket="batch", Key="pin/%2e%2e/%2e%2e/x.jsonl", Body=b'{"inputs": "x"}\n')
        shared._client = None
        try:
            async with httpx.AsyncClient(transport=httpx.MockTransport(
                    lambda r: sent.append(r) or httpx.Response(200, content=b"ok"))) as client:
                run = JobRun(job, check(request), TransformStore.open(tmp_path / "state"), Turns(lambda: [copy]),
                             Forwarder(RuntimeSettings(), client), senders=1)
                with pytest.raises(JobFailed) as failed:
                    await run.run()
        finally:
            shared._client = None
    assert str(failed.value).startswith(f"The input '%2e%2e/%2e%2e/x.jsonl' cannot have its output under "
                                        f"{output.as_uri()}: ")
    assert "once percent-decoded ('../../x.jsonl.out')" in str(failed.value)
    assert sent == [] and not [p for p in tmp_path.rglob("*.out")]


@pytest.mark.anyio
async def test_an_output_written_before_a_kill_is_not_written_again_when_the_job_resumes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 40: the leader killed between an object's output written and its mark; the next leader resumes the job
    and finds that output written for that job's object: it marks it done without writing it a second time."""
    from pier import storage as shared
    from pier.transform.job_run import _Object
    from pier.transform.transform_store import TransformStore

    request = {**REQUEST, "TransformOutput": {"S3OutputPath": (tmp_path / "out").as_uri()}}
    job = JobRecord(name="j", arn="arn", created=0.0, modified=0.0, request=request,
                    container=ContainerSpec.model_validate({"Image": "pier"}))
    store = TransformStore.open(tmp_path / "state")
    store.add_objects("j", [("s3://b/in/a", "a")])
    store.answer("j", "s3://b/in/a", 0, b'{"answer": 0}')
    write, landed = shared.write_once, []

    def counted(url: str, *args: Any, **kwargs: Any) -> bool:
        if written := write(url, *args, **kwargs):
            landed.append(url)
        return written

    monkeypatch.setattr(shared, "write_once", counted)
    mark = store.written
    for killed in (True, False):  # the first leader dies before its mark; the next one resumes
        monkeypatch.setattr(store, "written", (lambda *_: None) if killed else mark)
        run = JobRun(job, check(request), store, Turns(lambda: []), forwarder=None, senders=1)  # type: ignore[arg-type]
        await run._write(_Object(store.objects("j")[0], [Unit(0, (b"{}",))], 0))
    assert landed == [(tmp_path / "out" / "a.out").as_uri()]
    assert (tmp_path / "out" / "a.out").read_bytes().strip() == b'{"answer": 0}'
    assert store.objects("j")[0].done
