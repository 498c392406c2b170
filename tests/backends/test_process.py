from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pier.backends.base import CopySpec
from pier.backends.launch import parse_cores
from pier.backends.process import (
    PIER_ROOT,
    CopyProcess,
    PidFile,
    command,
    describe_exit,
    environment,
    free_port,
    http_url,
)

SPEC = CopySpec("ic-1", "ic", Path("/models/m"), {"HF_MODEL_ID": "tiny", "PYTHONPATH": "/user/code"}, cores=(2, 3))


@pytest.mark.parametrize(
    ("code", "words"),
    [(0, "exited with code 0"), (1, "exited with code 1"), (-9, "was killed by signal 9 (SIGKILL)"),
     (-15, "was killed by signal 15 (SIGTERM)"), (-99, "was killed by signal 99")],
)
def test_describe_exit(code: int, words: str) -> None:
    assert describe_exit(code) == words


def test_the_command_is_the_model_server_behind_the_launcher() -> None:
    argv = command("/py", SPEC, 4242)
    assert argv[:7] == ["/py", "-m", "pier.backends.launch", "--parent", str(os.getpid()), "--cores", "2,3"]
    assert argv[argv.index("--") + 1 :] == [
        "/py", "-m", "pier.server.container", "--model", "/models/m", "--port", "4242", "--host", "127.0.0.1",
    ]  # no --threads: the copy sizes its threads from the cores it is pinned to


def test_unpinned_copies_are_not_pinned() -> None:
    argv = command("/py", CopySpec("c", "ic", Path("/m")), 1)
    assert "--threads" not in argv and argv[argv.index("--cores") + 1] == ""


def test_environment_is_the_models_with_pier_importable() -> None:
    env = environment(SPEC)
    assert env["HF_MODEL_ID"] == "tiny"
    assert env["PYTHONPATH"].split(os.pathsep) == ["/user/code", PIER_ROOT]  # the model's own path first
    assert env["PATH"] == os.environ["PATH"]


@pytest.mark.parametrize(("gpus", "fallback", "expected"), [
    (("0", "1"), False, {"CUDA_VISIBLE_DEVICES": "0,1", "PIER_GPUS": "2"}),
    ((), False, {"CUDA_VISIBLE_DEVICES": "", "PIER_GPUS": "0"}),  # "" hides every GPU: a CUDA build runs on CPU
    ((), True, {"CUDA_VISIBLE_DEVICES": "", "PIER_GPUS": "0", "PIER_CPU_FALLBACK": "1"}),
])
def test_a_copy_sees_exactly_the_gpus_it_holds(gpus: tuple[str, ...], fallback: bool,
                                               expected: dict[str, str]) -> None:
    # Whatever the model's Environment or the gateway's say: GPUs are pier's to hand out.
    spec = CopySpec("c", "ic", Path("/m"), {"CUDA_VISIBLE_DEVICES": "0,1,2,3", "PIER_CPU_FALLBACK": "1"},
                    accelerators=1, gpus=gpus, cpu_fallback=fallback)
    env = environment(spec, {"PATH": "/usr/bin", "PIER_CPU_FALLBACK": "1", "PIER_GPUS": "8"})
    gpu_env = {k: v for k, v in env.items() if k in ("CUDA_VISIBLE_DEVICES", "PIER_GPUS", "PIER_CPU_FALLBACK")}
    assert gpu_env == expected and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


GATEWAY_ENV = {
    "PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TMPDIR": "/fast/tmp",
    "HF_HOME": "/cache/hf", "PIER_PARALLEL": "4", "OMP_NUM_THREADS": "2", "GGML_SCHED_MAX_COPIES": "1",
    "LD_LIBRARY_PATH": "/opt/lib", "HTTPS_PROXY": "http://proxy:3128",
    # the gateway's own secrets and settings, none of which a copy needs
    "AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token", "HF_TOKEN": "hf_x",
    "OPENAI_API_KEY": "sk-x", "PIER_API_KEY": "gateway-key", "PIER_ADMIN_TOKEN": "t", "DATABASE_URL": "postgres://x",
    "AWS_ENDPOINT_URL": "http://127.0.0.1:8080", "SSH_AUTH_SOCK": "/tmp/ssh",
}


def test_a_copy_gets_what_it_needs_of_the_gateways_environment_and_no_secret() -> None:
    env = environment(CopySpec("c", "ic", Path("/m"), {"HF_TOKEN": "the-models-own", "X": "y"}), GATEWAY_ENV)
    kept = {k for k in GATEWAY_ENV if k in env}
    assert kept == {"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "HF_HOME", "PIER_PARALLEL", "OMP_NUM_THREADS",
                    "GGML_SCHED_MAX_COPIES", "LD_LIBRARY_PATH", "HTTPS_PROXY", "HF_TOKEN"}
    assert env["HF_TOKEN"] == "the-models-own"  # what the model's Environment names, it gets
    assert env["X"] == "y" and env["PYTHONPATH"] == PIER_ROOT and env["PYTHONUNBUFFERED"] == "1"
    assert "secret" not in env.values() and "gateway-key" not in env.values()


@pytest.mark.e2e
def test_a_secret_in_the_gateways_environment_never_reaches_the_copys_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "do-not-leak")
    monkeypatch.setenv("PIER_API_KEY", "do-not-leak-either")
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")
    dump = tmp_path / "environ"
    python = tmp_path / "python"  # stands in for the interpreter: records the environment it was started with
    python.write_text(f"#!/bin/sh\nenv > {dump}\n")
    python.chmod(0o755)
    spec = CopySpec("c", "ic", tmp_path, {"MODEL_SETTING": "1"})
    copy = CopyProcess.spawn(spec, 1234, tmp_path / "copy.log", python=str(python))
    assert copy._process.wait(10) == 0
    seen = dict(line.split("=", 1) for line in dump.read_text().splitlines() if "=" in line)
    assert seen["MODEL_SETTING"] == "1" and seen["OMP_WAIT_POLICY"] == "passive" and "PATH" in seen
    assert "AWS_SECRET_ACCESS_KEY" not in seen and "PIER_API_KEY" not in seen
    assert "do-not-leak" not in dump.read_text()


@pytest.mark.parametrize(("text", "cores"), [("", set()), ("0", {0}), ("0,3, 5", {0, 3, 5})])
def test_parse_cores(text: str, cores: set[int]) -> None:
    assert parse_cores(text) == cores


@pytest.mark.e2e
def test_a_pid_file_kills_only_the_process_it_names(tmp_path: Path) -> None:
    survivor = subprocess.Popen(["sleep", "60"])
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        named = PidFile(tmp_path / "pid")
        named.write(survivor.pid)
        assert named.kill_survivor() == survivor.pid
        assert survivor.wait(5) == -signal.SIGKILL
        assert not named.path.exists()
        assert named.kill_survivor() is None  # nothing recorded
        stale = PidFile(tmp_path / "stale")
        stale.path.write_text(f"{bystander.pid} 1\n")  # the pid was reused by another process since
        assert stale.kill_survivor() is None and bystander.poll() is None
    finally:
        for process in (survivor, bystander):
            process.kill()
            process.wait()


@pytest.mark.e2e
def test_the_launcher_pins_then_becomes_the_command() -> None:
    core = min(os.sched_getaffinity(0))
    probe = "import os; print(os.getpid(), sorted(os.sched_getaffinity(0)))"
    out = subprocess.run(
        [sys.executable, "-m", "pier.backends.launch", "--parent", str(os.getpid()), "--cores", str(core), "--",
         sys.executable, "-c", probe], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.split(" ", 1)[1].strip() == f"[{core}]"


@pytest.mark.e2e
def test_the_launcher_explains_cores_it_cannot_have() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pier.backends.launch", "--parent", str(os.getpid()), "--cores", "4095", "--",
         sys.executable, "-c", "pass"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1 and "cannot pin the copy to cores [4095]" in out.stderr


@pytest.mark.e2e
def test_the_launcher_exits_when_its_parent_is_already_gone() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pier.backends.launch", "--parent", "1", "--", sys.executable, "-c", "print('ran')"],
        capture_output=True, text=True, timeout=30)
    assert out.returncode == 70 and "ran" not in out.stdout


def test_only_a_copy_that_fetches_its_code_from_s3_gets_the_way_to_s3(tmp_path: Path) -> None:
    parent = {"PATH": "/bin", "AWS_SECRET_ACCESS_KEY": "s3cr3t", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9000"}
    plain = CopySpec("a-0", "a", tmp_path)
    byoc = CopySpec("b-0", "b", tmp_path, environment={"SAGEMAKER_SUBMIT_DIRECTORY": "s3://bucket/sourcedir.tar.gz"})
    assert "AWS_SECRET_ACCESS_KEY" not in environment(plain, parent)
    fetching = environment(byoc, parent)
    assert fetching["AWS_SECRET_ACCESS_KEY"] == "s3cr3t" and fetching["AWS_ENDPOINT_URL_S3"] == "http://127.0.0.1:9000"


@pytest.mark.parametrize(("host", "port", "url"), [
    ("127.0.0.1", 8080, "http://127.0.0.1:8080"),
    ("10.0.3.7", 41000, "http://10.0.3.7:41000"),
    ("::1", 8080, "http://[::1]:8080"),
    ("[::1]", 8080, "http://[::1]:8080"),
    ("fd00::12:7", 5, "http://[fd00::12:7]:5"),
    ("node-3.cluster.local", 80, "http://node-3.cluster.local:80"),
])
def test_a_copy_url_brackets_ipv6_addresses(host: str, port: int, url: str) -> None:
    assert http_url(host, port) == url


@pytest.mark.skipif(not socket.has_ipv6, reason="this machine has no IPv6")
def test_a_free_port_on_an_ipv6_loopback() -> None:
    try:
        port = free_port("::1")
    except OSError:
        pytest.skip("::1 is not configured on this machine")
    assert 0 < port < 65536
