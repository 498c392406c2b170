"""`pier deploy / ls / describe / invoke / logs` as a newcomer gets them wrong: every mistake is one line that
says what to fix, a non-zero exit code, and no traceback; with keys in the state database (PIER_STATE_URL) they sign
with its admin key."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from pier.cli import app
from pier.gateway.app import create_gateway
from pier.gateway.settings import GatewaySettings
from tests.control.fakes import FakeBackend
from tests.gateway.served import Served
from tests.postgres import PostgresServer
from tests.sockets import serving


def pier(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def refused(result: Result, code: int, *words: str) -> None:
    """Exit `code`, the words in the message, and no traceback (typer prints one for an uncaught exception)."""
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    for word in words:
        assert word in result.output, result.output


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "tiny.gguf").write_bytes(b"GGUF")
    path = tmp_path / "pier.yaml"
    path.write_text(text)
    return path


def test_an_unknown_instance_type_is_one_line(served: Served, tmp_path: Path) -> None:
    path = write(tmp_path, "endpoint: chat\ninstance_type: ml.nope.xlarge\nmodel: {data: tiny.gguf}\n")
    refused(pier("deploy", str(path), "--url", served.url), 1, "Unknown InstanceType 'ml.nope.xlarge'")


def test_a_component_too_big_for_its_instance_is_one_line(served: Served, tmp_path: Path) -> None:
    path = write(tmp_path, "endpoint: big\ncomponents: [{name: c, model: {data: tiny.gguf}, memory_mb: 99999999}]\n")
    refused(pier("deploy", str(path), "--url", served.url), 1, "ResourceLimitExceeded", "needs 99999999 MiB")


def test_a_bad_endpoint_name_says_what_a_name_may_hold(tmp_path: Path) -> None:
    path = write(tmp_path, "endpoint: my_endpoint\nmodel: {data: tiny.gguf}\n")
    result = pier("deploy", str(path), "--url", "http://127.0.0.1:9")
    refused(result, 2, "`endpoint`", "'my_endpoint'", "letters, digits and hyphens")


def test_messages_keep_their_brackets(served: Served) -> None:
    """rich reads `[a-z]` as markup and drops it: a message is printed as it was written."""
    refused(pier("describe", "[x]", "--url", served.url), 1, "Value '[x]'", "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


@pytest.mark.parametrize("url", ["localhost:8080", "127.0.0.1", "ftp://127.0.0.1:8080"])
def test_a_url_without_its_scheme_is_one_line(url: str) -> None:
    refused(pier("ls", "--url", url), 2, f"--url {url}", "http://HOST:PORT")


def test_the_openai_base_url_is_not_the_gateway(served: Served) -> None:
    refused(pier("ls", "--url", served.url + "/v1"), 2, "without a path", served.url)


def test_a_body_file_that_is_not_there_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    refused(pier("invoke", "chat", "--body", f"@{missing}", "--url", "http://127.0.0.1:9"), 2,
            f"Cannot read {missing}")


def test_logs_of_nothing_is_an_error(served: Served) -> None:
    refused(pier("logs", "nope", "--url", served.url), 1, "No endpoint or inference component is called nope")


def test_chat_with_nothing_says_so_before_the_first_prompt(served: Served) -> None:
    result = CliRunner().invoke(app, ["chat", "nope", "--url", served.url], input="hello\n")
    refused(result, 1, "No endpoint or inference component is called nope")
    assert "you>" not in result.output


def test_ctrl_c_while_deploy_waits_says_what_goes_on(served: Served, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from pier.client.pier_client import PierClient

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(PierClient, "deploy", interrupted)
    path = write(tmp_path, "endpoint: chat\nmodel: {data: tiny.gguf}\n")
    refused(pier("deploy", str(path), "--url", served.url), 130,
            "Stopped waiting", "pier describe chat", "pier delete chat")


def test_calling_an_endpoint_of_components_by_its_name_says_which_to_name(served: Served, tmp_path: Path) -> None:
    path = write(tmp_path, "endpoint: host\ncomponents: [{name: qwen, model: {data: tiny.gguf}, memory_mb: 256}]\n")
    assert pier("deploy", str(path), "--url", served.url).exit_code == 0
    refused(pier("invoke", "host", "--prompt", "hi", "--url", served.url), 1,
            "Endpoint host hosts inference components (qwen)", "--component qwen")
    refused(pier("invoke", "host", "--prompt", "hi", "--stream", "--url", served.url), 1, "--component qwen")
    result = CliRunner().invoke(app, ["chat", "host", "--url", served.url], input="hello\n")
    refused(result, 1, "Endpoint host hosts inference components (qwen)", "pier chat qwen")


def test_deploy_without_waiting_does_not_say_deployed(served: Served, tmp_path: Path) -> None:
    result = pier("deploy", str(write(tmp_path, "endpoint: chat\nmodel: {data: tiny.gguf}\n")), "--url", served.url,
                  "--no-wait")
    assert result.exit_code == 0, result.output
    assert "chat deployed" not in result.output and "`pier describe chat`" in result.output


def test_ls_shows_the_first_line_of_a_failure_reason() -> None:
    """A copy's failure reason carries its last log lines: they belong to `pier describe`, not to a table row."""
    from pier.cli.endpoints import reason_line

    said = reason_line("Copy c failed: gave up.\nINFO: log\nERROR: log")
    assert said == "Copy c failed: gave up. (`pier describe` has the rest)"
    assert reason_line("No model at /x.") == "No model at /x."


def test_logs_refuses_a_count_of_lines_below_one() -> None:
    """The gateway answered `--lines -5` with empty logs: it looked as if the copies had written nothing."""
    result = pier("logs", "chat", "--lines", "-5", "--url", "http://127.0.0.1:9")
    assert result.exit_code == 2 and "--lines" in result.output


def test_logs_before_any_copy_says_what_the_endpoint_waits_on(served: Served, tmp_path: Path) -> None:
    """A Hugging Face checkpoint without a tokenizer: no copy ever starts, and `pier logs` says why."""
    from tests.gateway.served import sagemaker_client, wait_for

    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    (checkpoint / "model.safetensors").write_bytes(b"weights")
    sagemaker = sagemaker_client(served.url)
    sagemaker.create_model(ModelName="hf", PrimaryContainer={"ModelDataUrl": str(checkpoint)})
    sagemaker.create_endpoint_config(EndpointConfigName="hf", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "hf", "InstanceType": "local", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName="hf", EndpointConfigName="hf")
    wait_for(lambda: sagemaker.describe_endpoint(EndpointName="hf")["EndpointStatus"] == "Failed")
    result = pier("logs", "hf", "--url", served.url)
    assert result.exit_code == 0, result.output
    assert "No copies serve hf right now: it is Failed (" in result.output
    assert "has no tokenizer (tokenizer.json, tokenizer.model, or vocab.json with merges.txt)" in result.output


def test_with_keys_in_the_state_database_the_commands_sign_with_its_admin_key(
        tmp_path: Path, postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> None:
    url = postgres_server.database()
    assert pier("keys", "create", "ops", "--role", "admin", "--state-url", url).exit_code == 0
    gateway = create_gateway(tmp_path / "state", backend=FakeBackend(), settings=GatewaySettings(state_url=url))
    monkeypatch.setenv("PIER_STATE_DIR", str(tmp_path / "elsewhere"))  # its keys.json has none
    for name in ("PIER_ACCESS_KEY_ID", "PIER_SECRET_ACCESS_KEY", "PIER_STATE_URL"):
        monkeypatch.delenv(name, raising=False)
    with serving(gateway, lifespan="on") as gateway_url:
        refused(pier("ls", "--url", gateway_url), 1, "UnrecognizedClient")
        monkeypatch.setenv("PIER_STATE_URL", url)
        listed = pier("ls", "--url", gateway_url)
        assert listed.exit_code == 0, listed.output
