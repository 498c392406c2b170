"""Endpoints that failed (the backend gave up on their copies: no process) hold none of the host's copy cap: a new
endpoint is accepted and started, through boto3 against a served gateway."""

from __future__ import annotations

from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from pier.backends.base import CopyState
from pier.gateway.app import create_gateway
from pier.gateway.settings import GatewaySettings
from tests.control.fakes import FakeBackend
from tests.gateway.served import sagemaker_client, wait_for
from tests.runtime.servers import runtime_client
from tests.sockets import serving


def test_failed_endpoints_do_not_block_new_ones(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "m.gguf").write_bytes(b"GGUF")
    backend = FakeBackend(auto_ready=False)
    settings = GatewaySettings(max_copies_per_host=2)  # PIER_MAX_COPIES_PER_HOST=2
    with serving(create_gateway(tmp_path / "state", backend=backend, tick_s=0.05, settings=settings),
                 lifespan="on") as url:
        sagemaker = sagemaker_client(url)
        sagemaker.create_model(ModelName="m", PrimaryContainer={"ModelDataUrl": str(model)})
        sagemaker.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "local", "InitialInstanceCount": 1}])

        def status(name: str) -> str:
            return str(sagemaker.describe_endpoint(EndpointName=name)["EndpointStatus"])

        for name in ("broken1", "broken2"):
            sagemaker.create_endpoint(EndpointName=name, EndpointConfigName="c")
        wait_for(lambda: len(backend.copies) == 2)
        with pytest.raises(ClientError, match="ResourceLimitExceeded"):  # two starting copies do hold the cap
            sagemaker.create_endpoint(EndpointName="early", EndpointConfigName="c")
        for copy_id in list(backend.copies):
            backend.set_state(copy_id, CopyState.FAILED, "the model server exited")
        wait_for(lambda: status("broken1") == status("broken2") == "Failed")

        sagemaker.create_endpoint(EndpointName="fresh", EndpointConfigName="c")  # refused before: 2 of 2 held
        wait_for(lambda: any(c.startswith("fresh") for c in backend.copies))
        fresh = next(c for c in backend.copies if c.startswith("fresh"))
        backend.set_state(fresh, CopyState.READY)
        wait_for(lambda: status("fresh") == "InService")
        assert status("broken1") == "Failed"
        reason = sagemaker.describe_endpoint(EndpointName="broken1")["FailureReason"]
        with pytest.raises(ClientError) as raised:  # an invocation says why the endpoint failed
            runtime_client(url).invoke_endpoint(EndpointName="broken1", Body=b'{"inputs": "hi"}',
                                                ContentType="application/json")
        assert raised.value.response["Error"]["Code"] == "ServiceUnavailable"
        assert reason and f"It failed: {reason}" in raised.value.response["Error"]["Message"]
