"""`pier bench` as a user runs it, against a model whose vocabulary holds few English words (made-up words,
built with pier.synthetic): it starts at once, reading its prompt words from the server's /tokenize, directly
against a copy and through a gateway (the endpoint's /tokenize). Before, calibration probed for minutes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from pier.synthetic.builder import TINY, build_gguf
from pier.synthetic.vocab import build_vocab
from pier.synthetic.words import WORDS
from tests.e2e.gateway_process import GatewayProcess
from tests.e2e.test_gateway_e2e import WAIT, clients
from tests.server.processes import ContainerProcess, pier_environment
from tests.sockets import free_port

pytestmark = pytest.mark.e2e

BOUND_S = 30.0  # the whole command, four measured requests included (minutes before)


@pytest.fixture(scope="module")
def random_vocab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("random-vocab")
    return build_gguf(folder / "model.gguf", TINY, quant="Q8_0", name="pier-random-test", words=())


def test_the_vocabulary_has_few_english_words() -> None:
    whole = build_vocab(TINY.n_vocab, ()).tokens
    single = [w for w in WORDS if "▁" + w in whole]
    assert len(single) < len(WORDS) // 50  # ~30 of ~4,000: probing word by word finds almost none


def pier_bench(*argv: str) -> tuple[float, str]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pier", "bench", *argv, "--requests", "4", "--input-len", "48",
                           "--output-len", "4", "--warmup", "0", "--no-progress", "--timeout", "60"],
                          env=pier_environment(PIER_FAKE_GPUS="0"), capture_output=True, text=True, timeout=300)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    return took, done.stdout + done.stderr


def test_bench_against_a_copy_starts_at_once(random_vocab: Path, tmp_path: Path) -> None:
    with ContainerProcess(random_vocab.parent, tmp_path / "server.log") as server:
        server.wait_ready()
        took, output = pier_bench(server.url + "/v1/chat/completions", "--prompt-format", "text")
    assert took < BOUND_S, output
    said = " ".join(output.split())  # the console wraps its lines
    assert "prompt tokens: words," in said and "single-token words from the server's /tokenize" in said, output
    assert "(1 probe in" in said, output  # the one that checks the tokenizer's words against the usage


def test_bench_through_a_gateway_uses_the_endpoints_tokenizer(random_vocab: Path, tmp_path: Path) -> None:
    with GatewayProcess(tmp_path / "state", free_port(), tmp_path / "gateway.log") as gateway:
        gateway.wait_ready()
        sagemaker, _ = clients(gateway.url)
        sagemaker.create_model(ModelName="rnd", PrimaryContainer={"ModelDataUrl": f"file://{random_vocab.parent}"})
        sagemaker.create_endpoint_config(EndpointConfigName="rnd", ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": "rnd", "InstanceType": "local", "InitialInstanceCount": 1}])
        sagemaker.create_endpoint(EndpointName="rnd", EndpointConfigName="rnd")
        sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="rnd", WaiterConfig=WAIT)
        took, output = pier_bench("rnd", "--gateway", gateway.url)
    assert took < BOUND_S, output
    assert "single-token words from the server's /tokenize" in " ".join(output.split()), output
