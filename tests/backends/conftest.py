"""Fixtures for backend tests: a model folder holding a TINY GGUF, and a local backend on its own loop."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from pier.backends.base import CopySpec, CopyState, CopyStatus
from pier.backends.local import LocalBackend
from pier.backends.supervisor import SupervisionSettings
from tests.backends.loop import LoopThread

# The test client shares these cores: copies must not spin-wait on them.
COPY_ENV = {"OMP_WAIT_POLICY": "passive", "PIER_PARALLEL": "4", "HF_MODEL_ID": "tiny-test"}
FAST = SupervisionSettings(poll_s=0.1, health_interval_s=0.5, backoff_initial_s=0.2, backoff_max_s=1.0,
                           grace_s=10.0, startup_timeout_s=60.0)


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SageMaker-style model folder with a TINY GGUF in it, built in place (copies share it, never copy it)."""
    from pier.synthetic.builder import TINY, build_gguf

    folder = tmp_path_factory.mktemp("opt-ml-model")
    build_gguf(folder / "model.gguf", TINY, quant="Q8_0")
    return folder


def spec(copy_id: str, model_dir: Path, index: int = 0, **env: str) -> CopySpec:
    cores = sorted(os.sched_getaffinity(0))
    return CopySpec(copy_id, "ic", model_dir, {**COPY_ENV, **env}, cores=(cores[index % len(cores)],))


@dataclass
class Running:
    loop: LoopThread
    backend: LocalBackend

    def status(self, copy_id: str) -> CopyStatus:
        return next(s for s in self.backend.statuses() if s.copy_id == copy_id)

    def wait_for(self, condition: Callable[[], bool], timeout: float = 60.0, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                logs = {s.copy_id: self._logs(s.copy_id) for s in self.backend.statuses()}
                raise AssertionError(f"timed out waiting for {what}: {self.backend.statuses()}\n{logs}")
            time.sleep(0.05)

    def wait_ready(self, *copy_ids: str, timeout: float = 60.0) -> None:
        self.wait_for(lambda: all(self.status(c).state is CopyState.READY for c in copy_ids), timeout,
                      f"{copy_ids} to be ready")

    def _logs(self, copy_id: str) -> str:
        try:
            return self.backend.logs(copy_id, 30)
        except KeyError:
            return ""


@contextmanager
def backend_running(state_dir: Path, settings: SupervisionSettings = FAST) -> Iterator[Running]:
    """A local backend on a loop of its own; every copy it started is stopped at the end, and checked gone."""
    loop = LoopThread()
    backend = LocalBackend(state_dir, settings)
    try:
        yield Running(loop, backend)
    finally:
        pids = [s.pid for s in backend.statuses() if s.pid]
        loop.run(backend.close())
        loop.close()
        assert not [pid for pid in pids if alive(pid)], "copies left behind"


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    with backend_running(tmp_path / "state") as started:
        yield started


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
