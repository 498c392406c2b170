"""The local backend starting real model-server processes on a TINY GGUF."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from pier.backends.base import CopySpec, CopyState, CopyStatus
from pier.channel.copy_secret import copy_secret_header
from tests.backends.conftest import FAST, Running, alive, backend_running, spec

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def pair(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with backend_running(tmp_path_factory.mktemp("state")) as running:
        for index, copy_id in enumerate(["ic-1", "ic-2"]):
            running.loop.run(running.backend.start(spec(copy_id, model_dir, index)))
        running.wait_ready("ic-1", "ic-2")
        yield running


def generate(copy: CopyStatus) -> httpx.Response:
    """As the gateway calls a copy: with the copy's secret (pier.channel.copy_secret), or it answers 403."""
    assert copy.url
    return httpx.post(copy.url + "/generate", json={"inputs": "the cat", "parameters": {"max_new_tokens": 2}},
                      headers=copy_secret_header(copy.secret), timeout=10)


def test_copies_are_pinned_configured_and_share_the_weights(pair: Running, model_dir: Path) -> None:
    for index, copy_id in enumerate(["ic-1", "ic-2"]):
        status = pair.status(copy_id)
        assert status.url and status.pid and status.message == "" and status.restarts == 0
        cores = spec(copy_id, model_dir, index).cores
        allowed = Path(f"/proc/{status.pid}/status").read_text().split("Cpus_allowed_list:")[1].split()[0]
        assert allowed == ",".join(map(str, cores))
        argv = Path(f"/proc/{status.pid}/cmdline").read_text().split("\0")
        assert argv[1:3] == ["-m", "pier.server.container"] and "--threads" not in argv  # it reads its affinity
        models = httpx.get(status.url + "/v1/models", headers=copy_secret_header(status.secret)).json()
        assert models["data"][0]["id"] == "tiny-test"  # the spec's environment
        # Mapped, not read: both processes map the one file, so its pages are shared.
        assert str(model_dir / "model.gguf") in Path(f"/proc/{status.pid}/maps").read_text()
        assert generate(status).status_code == 200
    assert "Application startup complete" in pair.backend.logs("ic-1")
    assert len(pair.backend.logs("ic-1", lines=3).splitlines()) == 3


def test_a_killed_copy_restarts_while_the_other_keeps_serving(pair: Running) -> None:
    before, other = pair.status("ic-1"), pair.status("ic-2")
    assert before.pid and other.url
    os.kill(before.pid, signal.SIGKILL)
    pair.wait_for(lambda: pair.status("ic-1").state is not CopyState.READY, 5, "the kill to be noticed")
    served = 0
    while pair.status("ic-1").state is not CopyState.READY:
        assert generate(other).status_code == 200
        served += 1
        assert served < 200, f"ic-1 did not come back: {pair.status('ic-1')}"
    after = pair.status("ic-1")
    assert served > 0 and after.restarts == 1 and after.pid != before.pid and after.url
    assert generate(after).status_code == 200
    assert pair.status("ic-2").pid == other.pid and pair.status("ic-2").restarts == 0
    assert "the process was killed by signal 9 (SIGKILL)" in pair.backend.logs("ic-1")


def test_stop_drains_forgets_and_keeps_the_log(running: Running, model_dir: Path) -> None:
    copy = spec("solo", model_dir)
    running.loop.run(running.backend.start(copy))
    running.loop.run(running.backend.start(copy))  # the same spec again: nothing happens
    with pytest.raises(ValueError, match="already running with another spec"):
        running.loop.run(running.backend.start(replace(copy, environment={})))
    running.wait_ready("solo")
    pid = running.status("solo").pid
    assert pid is not None
    started = time.monotonic()
    running.loop.run(running.backend.stop("solo"))
    assert time.monotonic() - started < FAST.grace_s  # it drained and exited on SIGTERM, no SIGKILL needed
    assert not alive(pid) and running.backend.statuses() == []
    assert "stopped by pier: the process exited with code 0" in running.backend.logs("solo")
    running.loop.run(running.backend.stop("solo"))  # stopping twice is harmless
    with pytest.raises(KeyError, match="No log for copy nobody"):
        running.backend.logs("nobody")


def test_a_gateway_that_stops_leading_stops_its_copies_which_nobody_can_take_over(running: Running, model_dir: Path
                                                                                  ) -> None:
    running.loop.run(running.backend.take_over())  # nothing to take over: a local copy is its gateway's child
    assert running.backend.statuses() == []
    running.loop.run(running.backend.start(spec("solo", model_dir)))
    running.loop.run(running.backend.start(replace(spec("refused", model_dir), model_dir=model_dir / "gone")))
    running.wait_ready("solo")
    pid = running.status("solo").pid
    assert pid is not None
    running.loop.run(running.backend.let_go())
    assert running.backend.statuses() == []  # at once: it owns none, and routes to none
    running.wait_for(lambda: not alive(pid), FAST.grace_s, "the copy stopped in the background")
    running.wait_for(lambda: "stopped by pier" in running.backend.logs("solo"), 5, "its log saying so")


def test_a_copy_that_cannot_load_fails_after_its_retries(tmp_path: Path) -> None:
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "model.gguf").write_bytes(b"GGUF but not really")
    with backend_running(tmp_path / "state", replace(FAST, max_failed_starts=2)) as running:
        running.loop.run(running.backend.start(spec("bad", broken)))
        running.wait_for(lambda: running.status("bad").state is CopyState.FAILED, 60, "the copy to fail")
        status = running.status("bad")
        assert status.restarts == 1 and status.pid is None and status.url is None
        assert "gave up after 2 starts that never became ready; the last one exited with code 1" in status.message
        assert "could not load" in status.message  # the log's last lines say why


@pytest.mark.parametrize(
    ("change", "words"),
    [({"model_dir": Path("/nonexistent/model")}, "does not exist"), ({"cores": (4095,)}, "Cores [4095] are not"),
     ({"accelerators": 1}, "asks for 1 GPU(s) and was handed 0; pier never runs it on CPU unasked")],
)
def test_specs_that_cannot_run_fail_at_once(running: Running, model_dir: Path, change: dict[str, object],
                                            words: str) -> None:
    running.loop.run(running.backend.start(replace(spec("never", model_dir), **change)))  # type: ignore[arg-type]
    [status] = running.backend.statuses()
    assert status.state is CopyState.FAILED and words in status.message
    running.loop.run(running.backend.stop("never"))
    assert running.backend.statuses() == []


def test_with_cpu_fallback_a_copy_asking_for_gpus_serves_on_the_cpu_and_says_so(
    running: Running, model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="pier.backends"):
        running.loop.run(running.backend.start(replace(spec("gpu", model_dir), accelerators=1, cpu_fallback=True)))
    running.wait_for(lambda: running.status("gpu").state is CopyState.READY, 60, "the copy to be ready")
    assert "asks for 1 GPU(s) this host lacks; it runs on 1 CPU core(s) instead" in caplog.text
    status = running.status("gpu")
    environ = dict(entry.split("=", 1) for entry in
                   Path(f"/proc/{status.pid}/environ").read_text().split("\0") if "=" in entry)
    assert (environ["CUDA_VISIBLE_DEVICES"], environ["PIER_GPUS"], environ["PIER_CPU_FALLBACK"]) == ("", "0", "1")
    assert generate(status).status_code == 200
    running.loop.run(running.backend.stop("gpu"))


GATEWAY = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from pier.backends.base import CopySpec
    from pier.backends.local import LocalBackend

    async def main() -> None:
        backend = LocalBackend(Path(sys.argv[1]))
        await backend.start(CopySpec("orphan", "ic", Path(sys.argv[2]), {"OMP_WAIT_POLICY": "passive"}))
        while not backend.statuses()[0].pid:
            await asyncio.sleep(0.05)
        print(backend.statuses()[0].pid, flush=True)
        await asyncio.sleep(120)

    asyncio.run(main())
""")


def test_copies_die_with_a_gateway_that_is_killed(tmp_path: Path, model_dir: Path) -> None:
    gateway = subprocess.Popen([sys.executable, "-c", GATEWAY, str(tmp_path / "state"), str(model_dir)],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert gateway.stdout is not None
        copy_pid = int(gateway.stdout.readline())
        assert alive(copy_pid)
    finally:
        gateway.kill()
        gateway.wait(10)
    deadline = time.monotonic() + 10
    while alive(copy_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(copy_pid):
        os.kill(copy_pid, signal.SIGKILL)
        pytest.fail("the copy outlived its gateway")


def test_a_new_gateway_kills_a_copy_an_old_one_left_behind(running: Running, model_dir: Path, tmp_path: Path
                                                          ) -> None:
    # A survivor the death signal missed (say, started by a gateway thread that is still alive elsewhere):
    # simulated by a process recorded in the copy's pid file.
    folder = running.backend.state_dir / "copies" / "again"
    folder.mkdir(parents=True)
    survivor = subprocess.Popen(["sleep", "60"])
    try:
        from pier.backends.process import PidFile

        PidFile(folder / "pid").write(survivor.pid)
        running.loop.run(running.backend.start(CopySpec("again", "ic", model_dir, {"OMP_WAIT_POLICY": "passive"})))
        assert survivor.wait(10) == -signal.SIGKILL
    finally:
        survivor.kill()
        survivor.wait()


def test_a_copy_whose_process_cannot_even_start_fails(tmp_path: Path, model_dir: Path) -> None:
    settings = replace(FAST, max_failed_starts=2, python=str(tmp_path / "no-such-python"))
    with backend_running(tmp_path / "state", settings) as running:
        running.loop.run(running.backend.start(spec("nopython", model_dir)))
        running.wait_for(lambda: running.status("nopython").state is CopyState.FAILED, 10, "the copy to fail")
        assert "could not be started" in running.status("nopython").message
