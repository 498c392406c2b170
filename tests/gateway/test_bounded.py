"""Nothing blocking runs on the gateway's event loop: while a model fetch works (blocking, as hashing a big archive
or walking a big folder does), /ping and the control plane answer at once; a whole filesystem as a model folder is
refused with a reason."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console

from pier.control.fetch.model_store import ModelStore
from pier.control.fetch.source import ModelSource
from pier.gateway.app import create_gateway
from tests.control.fakes import FakeBackend
from tests.gateway.served import sagemaker_client, wait_for
from tests.sockets import serving

FETCH_S = 3.0


class SlowStore(ModelStore):
    """A store whose every fetch holds its thread for FETCH_S seconds without yielding, then walks the folder."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, console=Console(quiet=True))
        self.working = threading.Event()
        self.done = threading.Event()

    def fetch(self, source: ModelSource) -> Path:
        self.working.set()
        deadline = time.monotonic() + FETCH_S
        while time.monotonic() < deadline:  # busy, as hashing is (time.sleep would let anything run)
            sum(range(10_000))
        try:
            return super().fetch(source)
        finally:
            self.done.set()


def test_ping_and_the_control_plane_stay_fast_while_a_fetch_works(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "m.gguf").write_bytes(b"GGUF")
    for i in range(3000):  # a folder worth walking
        (model / f"shard-{i}.txt").touch()
    store = SlowStore(tmp_path / "cache")
    app = create_gateway(tmp_path / "state", backend=FakeBackend(), tick_s=0.05, store=store)
    with serving(app, lifespan="on") as url:
        sagemaker = sagemaker_client(url)
        sagemaker.create_model(ModelName="m", PrimaryContainer={"ModelDataUrl": str(model)})
        sagemaker.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "local", "InitialInstanceCount": 1}])
        sagemaker.create_endpoint(EndpointName="e", EndpointConfigName="c")
        assert store.working.wait(10)
        slowest, samples = 0.0, 0
        with httpx.Client(base_url=url) as client:
            while not store.done.is_set():
                started = time.monotonic()
                assert client.get("/ping").status_code == 200
                described = sagemaker.describe_endpoint(EndpointName="e")
                slowest = max(slowest, time.monotonic() - started)
                samples += 1
                time.sleep(0.02)
        assert described["EndpointStatus"] == "Creating"
        assert samples >= 5, samples  # the answers came while the fetch worked
        # On the event loop, one answer would wait out the whole fetch; beside it, a busy machine still adds some.
        assert slowest < FETCH_S / 2, slowest
        wait_for(lambda: sagemaker.describe_endpoint(EndpointName="e")["EndpointStatus"] == "InService", 10)


def test_a_whole_filesystem_is_refused_as_a_model_folder(tmp_path: Path) -> None:
    app = create_gateway(tmp_path / "state", backend=FakeBackend(), tick_s=0.05)
    with serving(app, lifespan="on") as url:
        sagemaker = sagemaker_client(url)
        for path in ("/", "/proc", "file:///sys/kernel"):
            error = _refused(sagemaker.create_model, ModelName="m", PrimaryContainer={"ModelDataUrl": path})
            assert "not a model folder: give the folder that holds the model's files" in error
        error = _refused(sagemaker.create_model, ModelName="m", PrimaryContainer={"Environment": {
            "HF_MODEL_ID": "/"}})
        assert "root of the filesystem" in error


def _refused(call: Any, **body: Any) -> str:
    try:
        call(**body)
    except Exception as error:  # botocore's ClientError
        response: dict[str, Any] = getattr(error, "response", {})
        assert response["Error"]["Code"] == "ValidationException"
        return str(response["Error"]["Message"])
    raise AssertionError("not refused")
