"""Hugging Face checkpoints served unchanged, as a SageMaker user hands them over: a `model.tar.gz` on S3 (moto) of a
random sharded Llama made with transformers, a local folder with HF_MODEL_QUANTIZE=q8_0, an architecture llama.cpp
does not know, and HF_MODEL_ID of a safetensors repo on a local Hub stand-in with the seed notebook's environment.
A gateway process converts each once with llama.cpp's own converter and serves the GGUF on pier's engine."""

from __future__ import annotations

import contextlib
import io
import json
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from pier.control.fetch import converter
from tests import checkpoints
from tests.e2e.gateway_process import GatewayProcess
from tests.hub_standin import Hub, hub_standin
from tests.sockets import free_port

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(bool(converter.missing_modules()), reason="the converter's packages (torch, transformers, "
                       "sentencepiece: the test extra) are not installed"),
]

TGI_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-tgi-inference:2.1-tgi2.0-gpu-py310"
ROLE = "arn:aws:iam::111122223333:role/sagemaker"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return checkpoints.llama(tmp_path_factory.mktemp("ckpt") / "llama")


@pytest.fixture(scope="module")
def hub() -> Iterator[Hub]:
    with hub_standin() as standin:
        yield standin


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, s3_url: str, hub: Hub) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("pier")
    env = {"AWS_ENDPOINT_URL_S3": s3_url, **CREDENTIALS, "HF_ENDPOINT": hub.url, "PIER_FAKE_GPUS": "0"}
    with GatewayProcess(folder / "state", free_port(), folder / "gateway.log", env, ("--cpu-fallback",)) as process:
        yield process.wait_ready()


def clients(gateway: GatewayProcess) -> tuple[Any, Any]:
    settings = {"endpoint_url": gateway.url, "region_name": "us-east-1", "aws_access_key_id": "x",
                "aws_secret_access_key": "x"}
    return boto3.client("sagemaker", **settings), boto3.client("sagemaker-runtime", **settings)


def deploy(sagemaker: Any, name: str, container: dict[str, Any], instance_type: str = "local") -> None:
    sagemaker.create_model(ModelName=name, ExecutionRoleArn=ROLE, PrimaryContainer={"Image": TGI_IMAGE, **container})
    sagemaker.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": name, "InstanceType": instance_type, "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name)


def watch(sagemaker: Any, name: str, timeout_s: float = 300) -> tuple[dict[str, Any], list[str]]:
    """Describe until the endpoint leaves Creating; the reasons it showed on the way."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        described = sagemaker.describe_endpoint(EndpointName=name)
        if described.get("FailureReason") and described["FailureReason"] not in seen:
            seen.append(described["FailureReason"])
        if described["EndpointStatus"] != "Creating":
            return described, seen
        time.sleep(0.2)
    raise AssertionError(f"{name} still Creating after {timeout_s} s; it showed {seen}")


def invoke(runtime: Any, name: str, payload: dict[str, Any]) -> Any:
    reply = runtime.invoke_endpoint(EndpointName=name, ContentType="application/json", Body=json.dumps(payload))
    return json.loads(reply["Body"].read())


def greedy_matches(runtime: Any, name: str, llama: Path) -> int:
    """For each prompt where the checkpoint's own top-2 logits stand apart, pier's greedy tokens are
    transformers' own; the number of prompts compared."""
    compared = 0
    for prompt in checkpoints.PROMPTS:
        answer = invoke(runtime, name, {"inputs": prompt, "parameters": {
            "max_new_tokens": 10, "do_sample": False, "details": True, "decoder_input_details": True}})
        details = answer[0]["details"] if isinstance(answer, list) else answer["details"]
        prompt_ids = [t["id"] for t in details["prefill"]]
        mine = [t["id"] for t in details["tokens"]]
        expected, gap = checkpoints.greedy(llama, prompt_ids, 10)
        if gap > 1e-3:
            assert mine and mine == expected[: len(mine)], (prompt, mine, expected)
            compared += 1
    return compared


def tar_gz(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(folder.iterdir()):
            tar.add(path, arcname=path.name)
    return buffer.getvalue()


def test_model_tar_gz_in_hugging_face_layout_is_converted_and_served(gateway: GatewayProcess, llama: Path,
                                                                     s3_url: str) -> None:
    s3 = boto3.client("s3", endpoint_url=s3_url, **{k.lower(): v for k, v in CREDENTIALS.items()
                                                  if k != "AWS_DEFAULT_REGION"}, region_name="us-east-1")
    s3.create_bucket(Bucket="models")
    s3.put_object(Bucket="models", Key="llama/model.tar.gz", Body=tar_gz(llama))
    sagemaker, runtime = clients(gateway)
    deploy(sagemaker, "hf-llama", {"ModelDataUrl": "s3://models/llama/model.tar.gz",
                                   "Environment": {"MESSAGES_API_ENABLED": "true", "MAX_TOTAL_TOKENS": "512"}})
    described, seen = watch(sagemaker, "hf-llama")
    assert described["EndpointStatus"] == "InService", described.get("FailureReason")
    assert "FailureReason" not in described
    assert any(r.startswith("Converting s3://models/llama/model.tar.gz to GGUF: ") for r in seen), seen
    assert greedy_matches(runtime, "hf-llama", llama) >= 3

    chat = invoke(runtime, "hf-llama", {"messages": [{"role": "user", "content": "hello world"}], "max_tokens": 4})
    assert chat["choices"][0]["message"]["role"] == "assistant"
    # the checkpoint's own chat template rendered the prompt: "<s>user: hello world\nassistant:"
    rendered = invoke(runtime, "hf-llama", {"inputs": "user: hello world\nassistant:", "parameters": {
        "max_new_tokens": 1, "details": True, "decoder_input_details": True}})
    assert chat["usage"]["prompt_tokens"] == len(rendered[0]["details"]["prefill"])


def test_q8_0_from_a_local_folder_and_once_per_precision(gateway: GatewayProcess, llama: Path) -> None:
    sagemaker, runtime = clients(gateway)
    deploy(sagemaker, "hf-llama-q8", {"ModelDataUrl": f"file://{llama}",
                                      "Environment": {"HF_MODEL_QUANTIZE": "q8_0", "MAX_TOTAL_TOKENS": "512"}})
    described, _ = watch(sagemaker, "hf-llama-q8")
    assert described["EndpointStatus"] == "InService", described.get("FailureReason")
    converted = sorted(p.name for p in (gateway.state_dir / "models" / "converted").glob("*/*.gguf"))
    assert converted == ["model-f32.gguf", "model-q8_0.gguf"]  # the first test's F32 and this one
    answer = invoke(runtime, "hf-llama-q8", {"inputs": "hello world", "parameters": {"max_new_tokens": 4}})
    assert isinstance(answer[0]["generated_text"], str)


def test_an_unknown_architecture_fails_its_endpoint_naming_it(gateway: GatewayProcess, tmp_path: Path) -> None:
    fancy = checkpoints.llama(tmp_path / "fancy", shard_size=None, architecture="FancyNetForCausalLM")
    sagemaker, _ = clients(gateway)
    started = time.monotonic()
    deploy(sagemaker, "hf-fancy", {"ModelDataUrl": f"file://{fancy}"})
    described, _ = watch(sagemaker, "hf-fancy", timeout_s=60)
    assert described["EndpointStatus"] == "Failed"
    assert time.monotonic() - started < 60
    assert "is a FancyNetForCausalLM, an architecture llama.cpp's converter does not know" in described["FailureReason"]


def test_hf_model_id_of_a_safetensors_repo_with_the_seed_notebooks_environment(gateway: GatewayProcess, llama: Path,
                                                                             hub: Hub) -> None:
    hub.add("pier-test/tiny-llama", llama)
    sagemaker, runtime = clients(gateway)
    deploy(sagemaker, "hf-hub-llama", {"Environment": {
        "HF_MODEL_ID": "pier-test/tiny-llama", "SM_NUM_GPUS": json.dumps(1), "MAX_INPUT_LENGTH": json.dumps(256),
        "MAX_TOTAL_TOKENS": json.dumps(512)}}, instance_type="ml.g5.2xlarge")
    described, _ = watch(sagemaker, "hf-hub-llama")
    assert described["EndpointStatus"] == "InService", described.get("FailureReason")
    assert greedy_matches(runtime, "hf-hub-llama", llama) >= 3
    assert "model.safetensors.index.json" in hub.downloads and not any(d.endswith(".bin") for d in hub.downloads)


def test_a_gated_repo_without_a_token_fails_with_the_fix(gateway: GatewayProcess, llama: Path, hub: Hub) -> None:
    hub.add("pier-test/gated-llama", llama, gated=True)
    sagemaker, _ = clients(gateway)
    deploy(sagemaker, "hf-gated", {"Environment": {"HF_MODEL_ID": "pier-test/gated-llama"}})
    described, _ = watch(sagemaker, "hf-gated", timeout_s=60)
    assert described["EndpointStatus"] == "Failed"
    assert "hf://pier-test/gated-llama is a gated repo" in described["FailureReason"]
    assert "HF_TOKEN" in described["FailureReason"]


def converters_of(state_dir: Path) -> list[Any]:
    """The conversion processes (llama.cpp's converter, the quantizer) writing under this gateway's models."""
    import psutil

    scratch = str(state_dir / "models" / "tmp")
    found = []
    for process in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if any(scratch in part for part in process.info["cmdline"] or []):
                found.append(process)
    return found


def test_a_gateway_killed_mid_conversion_leaves_nothing_and_converts_again(
        tmp_path: Path, llama: Path, s3_url: str) -> None:
    import psutil

    state, port = tmp_path / "state", free_port()
    env = {"AWS_ENDPOINT_URL_S3": s3_url, **CREDENTIALS}
    first = GatewayProcess(state, port, tmp_path / "gateway.log", env).wait_ready()
    try:
        sagemaker, runtime = clients(first)
        deploy(sagemaker, "hf-restarted", {"ModelDataUrl": f"file://{llama}",
                                           "Environment": {"HF_MODEL_QUANTIZE": "q6_k"}})
        deadline = time.monotonic() + 120
        while not (running := converters_of(state)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert running and first.process.pid not in {p.pid for p in running}, "no conversion started"
        first.process.kill()  # SIGKILL: no shutdown of its own
        first.process.wait()
        _, alive = psutil.wait_procs(running, timeout=2)  # at once: a conversion alone takes longer
        assert not alive, "a conversion outlived its gateway"
    finally:
        first.stop()
    assert not list((state / "models" / "converted").glob("*/*.gguf"))  # nothing half-written was published
    with GatewayProcess(state, port, tmp_path / "gateway.log", env) as again:
        again.wait_ready()
        described, _ = watch(sagemaker, "hf-restarted")
        assert described["EndpointStatus"] == "InService", described.get("FailureReason")
        assert [p.name for p in (state / "models" / "converted").glob("*/*.gguf")] == ["model-q6_k.gguf"]
        assert list((state / "models" / "tmp").iterdir()) == []  # the dead gateway's scratch was removed
        assert invoke(runtime, "hf-restarted", {"inputs": "hello", "parameters": {"max_new_tokens": 2}})


def test_a_peft_adapter_on_an_adapter_component_answers_as_the_merged_checkpoint(
        gateway: GatewayProcess, llama: Path, hub: Hub, tmp_path: Path) -> None:
    hub.add("pier-test/tiny-llama", llama)  # the adapter's base_model_name_or_path: its config.json is read there
    downloaded = list(hub.downloads)
    adapter = checkpoints.lora(tmp_path / "adapter", llama, "pier-test/tiny-llama")
    reference = checkpoints.merged(llama, adapter, tmp_path / "merged")
    sagemaker, runtime = clients(gateway)
    sagemaker.create_model(ModelName="hf-base", ExecutionRoleArn=ROLE, PrimaryContainer={
        "Image": TGI_IMAGE, "ModelDataUrl": f"file://{llama}", "Environment": {"MAX_TOTAL_TOKENS": "512"}})
    sagemaker.create_endpoint_config(EndpointConfigName="hf-lora", ProductionVariants=[{
        "VariantName": "AllTraffic", "InstanceType": "local", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName="hf-lora", EndpointConfigName="hf-lora")
    watch(sagemaker, "hf-lora")
    sagemaker.create_inference_component(
        InferenceComponentName="hf-lora-base", EndpointName="hf-lora", VariantName="AllTraffic",
        Specification={"ModelName": "hf-base", "ComputeResourceRequirements": {
            "NumberOfCpuCoresRequired": 1, "MinMemoryRequiredInMb": 256}}, RuntimeConfig={"CopyCount": 1})
    sagemaker.create_inference_component(
        InferenceComponentName="hf-lora-adapter", EndpointName="hf-lora",
        Specification={"BaseInferenceComponentName": "hf-lora-base", "Container": {"ArtifactUrl": f"file://{adapter}"}})
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        statuses = [sagemaker.describe_inference_component(InferenceComponentName=n) for n in ("hf-lora-base",
                                                                                                "hf-lora-adapter")]
        if all(s["InferenceComponentStatus"] != "Creating" for s in statuses):
            break
        time.sleep(0.5)
    assert [s["InferenceComponentStatus"] for s in statuses] == ["InService", "InService"], statuses
    compared = 0
    for prompt in checkpoints.PROMPTS:
        reply = runtime.invoke_endpoint(
            EndpointName="hf-lora", InferenceComponentName="hf-lora-adapter", ContentType="application/json",
            Body=json.dumps({"inputs": prompt, "parameters": {"max_new_tokens": 10, "do_sample": False,
                                                               "details": True, "decoder_input_details": True}}))
        details = json.loads(reply["Body"].read())[0]["details"]
        mine = [t["id"] for t in details["tokens"]]
        expected, gap = checkpoints.greedy(reference, [t["id"] for t in details["prefill"]], 10)
        if gap > 1e-3:
            assert mine and mine == expected[: len(mine)], (prompt, mine, expected)
            compared += 1
    assert compared >= 3
    assert hub.downloads[len(downloaded):] == ["config.json"]  # the base's config alone, never its weights


def test_the_seed_notebooks_hugging_face_model_deploys_with_the_sagemaker_sdk(
        tmp_path: Path, llama: Path, hub: Hub, s3_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Llama 2 seed's cells as they are: HuggingFaceModel with its env (a gated repo opened by
    HUGGING_FACE_HUB_TOKEN), ResourceRequirements, an inference-component endpoint, predict."""
    for name, value in {"AWS_ENDPOINT_URL_S3": s3_url, **CREDENTIALS, "SAGEMAKER_SUPPRESS_V2_WARNING": "1"}.items():
        monkeypatch.setenv(name, value)  # the SDK's session bucket on moto, as the seeds' tests have it
    sagemaker_sdk = pytest.importorskip("sagemaker", reason="the sagemaker SDK is in the test extra")
    from sagemaker.compute_resource_requirements.resource_requirements import ResourceRequirements
    from sagemaker.enums import EndpointType
    from sagemaker.huggingface import HuggingFaceModel

    hub.add("pier-test/Llama-tiny-chat-hf", llama, gated=True)
    with GatewayProcess(tmp_path / "state", free_port(), tmp_path / "gateway.log",
                        {**CREDENTIALS, "HF_ENDPOINT": hub.url, "PIER_FAKE_GPUS": "0"}, ("--cpu-fallback",)) as up:
        sagemaker, runtime = clients(up.wait_ready())
        session = sagemaker_sdk.Session(boto_session=boto3.Session(region_name="us-east-1"),
                                        sagemaker_client=sagemaker, sagemaker_runtime_client=runtime,
                                        default_bucket="sagemaker-us-east-1-111122223333")
        config = {"HF_MODEL_ID": "pier-test/Llama-tiny-chat-hf", "SM_NUM_GPUS": json.dumps(1),
                  "MAX_INPUT_LENGTH": json.dumps(256), "MAX_TOTAL_TOKENS": json.dumps(512),
                  "MAX_BATCH_TOTAL_TOKENS": json.dumps(2048), "HUGGING_FACE_HUB_TOKEN": "hf_test_token"}
        llm_model = HuggingFaceModel(role=ROLE, image_uri=TGI_IMAGE, env=config, sagemaker_session=session)
        llm = llm_model.deploy(
            initial_instance_count=1, instance_type="ml.g5.2xlarge", container_startup_health_check_timeout=300,
            resources=ResourceRequirements(requests={"copies": 1, "num_accelerators": 1, "num_cpus": 1,
                                                     "memory": 1024}),
            endpoint_name="llama-tiny-chat", endpoint_type=EndpointType.INFERENCE_COMPONENT_BASED)
        answer = llm.predict({"inputs": "user: hello world\nassistant:", "parameters": {
            "do_sample": True, "top_p": 0.6, "temperature": 0.9, "top_k": 50, "max_new_tokens": 8,
            "repetition_penalty": 1.03}})
        assert isinstance(answer[0]["generated_text"], str)
