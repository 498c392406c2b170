"""The seeds as a new user runs them against `pier up`: only the endpoint URL changed, S3 played by moto.

The `sagemaker` SDK deploys bring-your-own-code models exactly as it does on AWS (its own uploads, repacks and
CreateModel environment): a model.tar.gz with `inference.py` at its root (the PyTorch container imports it), an
entry point it uploads as `sourcedir.tar.gz` (SAGEMAKER_SUBMIT_DIRECTORY=s3://...), and a `source_dir` it repacks
into `code/` (SAGEMAKER_SUBMIT_DIRECTORY=/opt/ml/model/code). An image built for llama.cpp names a
SAGEMAKER_PROGRAM the model data does not hold: its GGUF is served, and a benchmark client written for TGI reads
the Messages stream. With neither program nor GGUF the endpoint goes Failed, saying so.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from pier.client.pier_client import PierClient
from tests.e2e.gateway_process import GatewayProcess
from tests.sockets import free_port

pytestmark = pytest.mark.e2e

PYTORCH_IMAGE = ("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference-arm64:"
                 "2.5.1-cpu-py311-ubuntu22.04-sagemaker")  # the seed's Graviton image
ROLE = "arn:aws:iam::111122223333:role/sagemaker"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}
WAIT = {"Delay": 1, "MaxAttempts": 180}

INFERENCE_PY = """
    import os

    import helpers  # a sibling module of the entry point

    def model_fn(model_dir):
        return {"model_dir": model_dir, "ggufs": sorted(f for f in os.listdir(model_dir) if f.endswith(".gguf"))}

    def predict_fn(data, model):
        return {"greeting": helpers.greet(data["name"]), "file": __file__, "model_dir": model["model_dir"],
                "ggufs": model["ggufs"], "program": os.environ.get("SAGEMAKER_PROGRAM"),
                "submitted": os.environ.get("SAGEMAKER_SUBMIT_DIRECTORY")}
"""
HELPERS_PY = "def greet(name):\n    return 'hello ' + name\n"


def tar_gz(files: dict[str, Path | str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, content in files.items():
            if isinstance(content, Path):
                tar.add(content.resolve(), arcname=name)
            else:
                data = textwrap.dedent(content).encode()
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, s3_url: str) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("pier")
    env = {"AWS_ENDPOINT_URL_S3": s3_url, "PIER_CACHE_DIR": str(folder / "cache"), **CREDENTIALS}
    with GatewayProcess(folder / "state", free_port(), folder / "gateway.log", env) as process:
        yield process.wait_ready()


@pytest.fixture(scope="module")
def aws(gateway: GatewayProcess, s3_url: str) -> Iterator[dict[str, Any]]:
    """boto3 and the sagemaker SDK as a notebook has them: SageMaker at pier, S3 at moto."""
    saved = dict(os.environ)
    os.environ.update({"AWS_ENDPOINT_URL_S3": s3_url, **CREDENTIALS,
                       "SAGEMAKER_SUPPRESS_V2_WARNING": "1"})
    try:
        sagemaker_sdk = pytest.importorskip("sagemaker", reason="the sagemaker SDK is in the test extra")
        settings = {"endpoint_url": gateway.url, "region_name": "us-east-1"}
        sagemaker = boto3.client("sagemaker", **settings)
        runtime = boto3.client("sagemaker-runtime", **settings, config=Config(retries={"max_attempts": 1}))
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="models")
        # As the seeds do: sagemaker.Session(default_bucket=sagemaker_session_bucket).
        session = sagemaker_sdk.Session(boto_session=boto3.Session(region_name="us-east-1"),
                                        sagemaker_client=sagemaker, sagemaker_runtime_client=runtime,
                                        default_bucket="sagemaker-us-east-1-111122223333")
        yield {"sagemaker": sagemaker, "runtime": runtime, "s3": s3, "session": session, "sdk": sagemaker_sdk}
    finally:
        os.environ.clear()
        os.environ.update(saved)


def deploy(aws: dict[str, Any], name: str, **model: Any) -> Any:
    """Model(...).deploy() as the seeds call it; waited for with boto3's waiter (the SDK polls every 30 s)."""
    from sagemaker.deserializers import JSONDeserializer
    from sagemaker.predictor import Predictor
    from sagemaker.serializers import JSONSerializer

    sdk_model = aws["sdk"].model.Model(image_uri=PYTORCH_IMAGE, role=ROLE, sagemaker_session=aws["session"],
                                       predictor_cls=Predictor, name=name, **model)
    sdk_model.deploy(initial_instance_count=1, instance_type="ml.c7g.large", endpoint_name=name, wait=False)
    aws["sagemaker"].get_waiter("endpoint_in_service").wait(EndpointName=name, WaiterConfig=WAIT)
    return Predictor(name, sagemaker_session=aws["session"], serializer=JSONSerializer(),
                     deserializer=JSONDeserializer())


def environment_of(aws: dict[str, Any], name: str) -> dict[str, str]:
    container = aws["sagemaker"].describe_model(ModelName=name)["PrimaryContainer"]
    return dict(container.get("Environment", {}))


def test_sdk_deploys_a_model_tar_gz_with_inference_py_at_its_root(aws: dict[str, Any], tiny_gguf: Path) -> None:
    """The PyTorch container archives the whole model folder for TorchServe: a root inference.py is imported."""
    body = tar_gz({"inference.py": INFERENCE_PY, "helpers.py": HELPERS_PY, "model.gguf": tiny_gguf})
    aws["s3"].put_object(Bucket="models", Key="root/model.tar.gz", Body=body)
    predictor = deploy(aws, "root-handler", model_data="s3://models/root/model.tar.gz")
    answer = predictor.predict({"name": "root"})
    assert answer["greeting"] == "hello root" and answer["ggufs"] == ["model.gguf"]
    assert Path(answer["file"]).name == "inference.py" and Path(answer["file"]).parent == Path(answer["model_dir"])


def test_sdk_uploads_the_entry_point_as_sourcedir_tar_gz(aws: dict[str, Any], tiny_gguf: Path,
                                                        tmp_path: Path) -> None:
    """`Model(entry_point=...)` without source_dir: the SDK uploads sourcedir.tar.gz and names it in
    SAGEMAKER_SUBMIT_DIRECTORY; the model data is the GGUF alone."""
    aws["s3"].put_object(Bucket="models", Key="gguf/model.tar.gz", Body=tar_gz({"model.gguf": tiny_gguf}))
    (tmp_path / "inference.py").write_text(textwrap.dedent(INFERENCE_PY))
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "__init__.py").write_text(HELPERS_PY)
    predictor = deploy(aws, "sourcedir-handler", model_data="s3://models/gguf/model.tar.gz",
                       entry_point=str(tmp_path / "inference.py"), dependencies=[str(tmp_path / "helpers")])
    env = environment_of(aws, "sourcedir-handler")
    assert env["SAGEMAKER_PROGRAM"] == "inference.py"
    assert env["SAGEMAKER_SUBMIT_DIRECTORY"].startswith("s3://") and env["SAGEMAKER_SUBMIT_DIRECTORY"].endswith(
        "/sourcedir.tar.gz")
    answer = predictor.predict({"name": "sourcedir"})
    assert answer["greeting"] == "hello sourcedir" and answer["ggufs"] == ["model.gguf"]
    assert answer["submitted"] == env["SAGEMAKER_SUBMIT_DIRECTORY"] and "sourcedir" in answer["file"]


def test_sdk_repacks_a_source_dir_into_code(aws: dict[str, Any], tmp_path: Path) -> None:
    """`Model(entry_point=..., source_dir=...)`: the SDK repacks model.tar.gz with code/ and sets
    SAGEMAKER_SUBMIT_DIRECTORY=/opt/ml/model/code, SageMaker's path of the model folder."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "inference.py").write_text(textwrap.dedent(INFERENCE_PY))
    (code / "helpers.py").write_text(HELPERS_PY)
    predictor = deploy(aws, "repacked-handler", model_data="s3://models/gguf/model.tar.gz",
                       entry_point="inference.py", source_dir=str(code))
    env = environment_of(aws, "repacked-handler")
    assert env["SAGEMAKER_SUBMIT_DIRECTORY"] == "/opt/ml/model/code"
    answer = predictor.predict({"name": "repacked"})
    assert answer["greeting"] == "hello repacked" and answer["ggufs"] == ["model.gguf"]
    assert Path(answer["file"]) == Path(answer["model_dir"]) / "code" / "inference.py"


def test_an_image_for_llama_cpp_serves_the_gguf_and_streams_tgi_messages(aws: dict[str, Any],
                                                                          gateway: GatewayProcess) -> None:
    """The seed's CDK stack sets SAGEMAKER_PROGRAM for the image's own server; the model data is the GGUF."""
    sagemaker, runtime = aws["sagemaker"], aws["runtime"]
    sagemaker.create_model(ModelName="llama-image", ExecutionRoleArn=ROLE, PrimaryContainer={
        "Image": PYTORCH_IMAGE, "ModelDataUrl": "s3://models/gguf/model.tar.gz",
        "Environment": {"SAGEMAKER_PROGRAM": "inference.py", "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code",
                        "MAX_TOTAL_TOKENS": "512"}})
    sagemaker.create_endpoint_config(EndpointConfigName="llama-image", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "llama-image", "InstanceType": "ml.c7g.large",
        "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName="llama-image", EndpointConfigName="llama-image")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="llama-image", WaiterConfig=WAIT)
    [log] = PierClient(gateway.url).logs("llama-image").values()
    assert "SAGEMAKER_PROGRAM=inference.py is not in the model data" in log
    assert "serving model.gguf on pier's engine instead" in log

    # What llmperf's SageMaker client does with MESSAGES_API=true: every JSON line's choices[0].delta.content.
    payload = {"messages": [{"role": "user", "content": "What is deep learning?"}], "max_tokens": 6, "stream": True}
    stream = runtime.invoke_endpoint_with_response_stream(EndpointName="llama-image", Body=json.dumps(payload),
                                                          ContentType="application/json")
    received = b"".join(event["PayloadPart"]["Bytes"] for event in stream["Body"])
    chunks = [json.loads(line[line.find(b"{"):]) for line in received.splitlines() if b"{" in line]
    text = "".join(chunk["choices"][0]["delta"]["content"] for chunk in chunks)
    assert len(chunks) <= 6 and text is not None
    assert chunks[-1]["choices"][0]["finish_reason"] in ("length", "eos_token")
    assert all(chunk["choices"][0]["delta"]["role"] == "assistant" for chunk in chunks)

    deep = runtime.exceptions.ModelError
    with pytest.raises(deep) as caught:
        runtime.invoke_endpoint(EndpointName="llama-image", Body=b"[" * 100_000, ContentType="application/json")
    assert caught.value.response["OriginalStatusCode"] == 400


def test_neither_program_nor_gguf_fails_the_endpoint_naming_both(aws: dict[str, Any]) -> None:
    from botocore.exceptions import WaiterError

    aws["s3"].put_object(Bucket="models", Key="empty/model.tar.gz", Body=tar_gz({"config.json": "{}"}))
    sagemaker = aws["sagemaker"]
    sagemaker.create_model(ModelName="nothing", ExecutionRoleArn=ROLE, PrimaryContainer={
        "Image": PYTORCH_IMAGE, "ModelDataUrl": "s3://models/empty/model.tar.gz",
        "Environment": {"SAGEMAKER_PROGRAM": "inference.py"}})
    sagemaker.create_endpoint_config(EndpointConfigName="nothing", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "nothing", "InstanceType": "ml.c7g.large",
        "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName="nothing", EndpointConfigName="nothing")
    with pytest.raises(WaiterError, match="Failed"):
        sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="nothing", WaiterConfig=WAIT)
    reason = sagemaker.describe_endpoint(EndpointName="nothing")["FailureReason"]
    assert "SAGEMAKER_PROGRAM=inference.py names a handler script that is not in the model data" in reason
    assert "No .gguf file in" in reason
