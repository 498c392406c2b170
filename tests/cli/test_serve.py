import pytest
from typer.testing import CliRunner

from pier.cli import app
from pier.cli.serve import endpoint_name
from pier.control.names import ENDPOINT_NAME


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
