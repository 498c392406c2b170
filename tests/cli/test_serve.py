import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import pier
from pier.cli import app
from pier.cli.serve import endpoint_name
from pier.control.names import ENDPOINT_NAME
from tests.gateway.served import Served
from tests.sockets import free_port


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("./models/qwen2.5-0.5b-instruct-q4_0.gguf", "qwen2-5-0-5b-instruct-q4-0"),
        ("/abs/Llama-3.2-1B.Q4_K_M.gguf", "Llama-3-2-1B-Q4-K-M"),
        ("hf://org/repo/model.gguf", "model"),
        ("s3://bucket/prefix/", "prefix"),
        ("__.gguf", "model"),
        ("x" * 80 + ".gguf", "x" * 63),
    ],
)
def test_endpoint_name_is_valid_for_sagemaker(source: str, expected: str) -> None:
    import re

    name = endpoint_name(source)
    assert name == expected
    assert re.fullmatch(ENDPOINT_NAME, name)


def test_serve_refuses_a_model_and_demo_together() -> None:
    result = CliRunner().invoke(app, ["serve", "x.gguf", "--demo"])
    assert result.exit_code == 2
    assert "not both" in result.output


def test_invoke_needs_exactly_one_body() -> None:
    result = CliRunner().invoke(app, ["invoke", "demo", "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 2  # refused before any connection is tried
    assert "--prompt" in result.output


def test_up_refuses_an_unknown_backend_and_a_bad_ray_config(tmp_path) -> None:
    result = CliRunner().invoke(app, ["up", "--backend", "nope"])
    assert result.exit_code == 2 and "use one of local, ray" in result.output
    config = tmp_path / "ray.yaml"
    config.write_text("cpus_per_vcpu: lots\n")
    result = CliRunner().invoke(app, ["up", "--backend", "ray", "--ray-config", str(config)])
    assert result.exit_code == 2 and "cpus_per_vcpu" in result.output  # refused before Ray is touched


def run_pier(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """The real command in its own process: a gateway that starts by mistake is stopped by the timeout."""
    env = {**os.environ, "PYTHONPATH": str(Path(pier.__file__).parents[1]), "HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "pier", *args], capture_output=True, text=True, timeout=90,
                          env=env, check=False)


def test_serve_refuses_a_model_path_that_is_not_there_before_starting(tmp_path: Path) -> None:
    result = run_pier("serve", str(tmp_path / "qwen.gguf"), "--port", str(free_port()), home=tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"No model at {tmp_path / 'qwen.gguf'}" in result.stderr
    assert "Traceback" not in result.stderr and "gateway on" not in result.stderr
    assert not (tmp_path / ".pier" / "state.sqlite3").exists()  # nothing made that a later serve would trip on


def test_serve_reads_a_file_url_as_the_gateway_does(tmp_path: Path) -> None:
    """Decoded once (pier.host_path): the path checked is the one the gateway will fetch; '..' is refused."""
    spaced = run_pier("serve", f"file://{tmp_path}/my%20models/qwen.gguf", "--port", str(free_port()), home=tmp_path)
    assert spaced.returncode == 2 and f"No model at {tmp_path / 'my models' / 'qwen.gguf'}" in spaced.stderr
    climbing = run_pier("serve", f"file://{tmp_path}/%2e%2e/qwen.gguf", "--port", str(free_port()), home=tmp_path)
    assert climbing.returncode == 2 and "'.' or '..' segment" in climbing.stderr, climbing.stderr


def test_serve_refuses_a_name_sagemaker_would_refuse(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["serve", str(tmp_path / "m.gguf"), "--name", "my_qwen"])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit | None), result.exception
    assert "--name 'my_qwen' is not an endpoint name" in result.output and "letters, digits" in result.output


def test_serve_whose_endpoint_fails_exits_non_zero(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = run_pier("serve", str(tmp_path / "empty"), "--port", str(free_port()), "--state-dir",
                      str(tmp_path / "state"), home=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "Could not deploy empty" in result.stderr


@pytest.mark.parametrize("command", ["up", "serve"])
def test_a_port_in_use_is_refused_before_anything_starts(command: str, tmp_path: Path) -> None:
    """`pier serve` used to create its endpoint on whatever answered there (another gateway)."""
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        model = [str(tmp_path / "m.gguf")] if command == "serve" else []
        result = run_pier(command, *model, "--port", str(port), "--state-dir", str(tmp_path / "s"), home=tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"127.0.0.1:{port} is in use" in result.stderr and "--port" in result.stderr
    assert "Traceback" not in result.stderr and "gateway on" not in result.stderr


def test_serve_on_another_port_says_where_the_cli_finds_it(capsys: pytest.CaptureFixture[str]) -> None:
    from pier.cli.serve import _print_urls

    _print_urls("http://127.0.0.1:18080", "qwen")
    said = capsys.readouterr().err
    assert "export PIER_URL=http://127.0.0.1:18080, then: pier chat qwen" in said
    _print_urls("http://127.0.0.1:8080", "qwen")
    assert "PIER_URL" not in capsys.readouterr().err


@pytest.mark.parametrize("command", [["up"], ["serve", "--demo"], ["container"]])
def test_a_port_out_of_range_is_refused(command: list[str], tmp_path: Path) -> None:
    """uvicorn listened on 99999 modulo 65536 and said it listened on 99999."""
    result = run_pier(*command, "--port", "99999", home=tmp_path)
    assert result.returncode == 2 and "--port" in result.stderr and "65535" in result.stderr


@pytest.mark.parametrize("command", ["up", "serve"])
def test_a_state_dir_that_is_a_file_is_refused(command: str, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    demo = ["--demo"] if command == "serve" else []
    result = run_pier(command, *demo, "--port", str(free_port()), "--state-dir", str(tmp_path / "afile"),
                      home=tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"--state-dir {tmp_path / 'afile'} is a file" in result.stderr and "Traceback" not in result.stderr


def test_a_gateway_stopped_while_serve_deploys_is_no_failure(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C while the endpoint was Creating: the deploy thread died in a botocore traceback."""
    import threading

    from pier.cli import serve
    from pier.client.deploy_file import DeployFile, ModelBlock
    from pier.client.pier_client import PierClient

    monkeypatch.setattr(serve, "_wait_for_gateway", lambda client: None)  # it answered, then stopped
    failed = threading.Event()
    file = DeployFile(endpoint="qwen", model=ModelBlock(data="/m.gguf"))
    serve._deploy(PierClient(f"http://127.0.0.1:{free_port()}", credentials=("a", "b")), file, failed)
    assert not failed.is_set() and "Could not deploy" not in capsys.readouterr().err


def test_a_refused_serve_deploy_is_one_line(served: Served, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    import threading

    from pier.cli import serve
    from pier.client.deploy_file import DeployFile, ModelBlock
    from pier.client.pier_client import PierClient

    stopped: list[int] = []
    monkeypatch.setattr(os, "kill", lambda pid, number: stopped.append(number))
    failed = threading.Event()
    file = DeployFile(endpoint="qwen", instance_type="ml.nope.large", model=ModelBlock(data="/m.gguf"))
    serve._deploy(PierClient(served.url), file, failed)
    assert failed.is_set() and stopped
    assert "Could not deploy qwen: CreateEndpointConfig refused: ValidationException: Unknown InstanceType" in (
        capsys.readouterr().err)
