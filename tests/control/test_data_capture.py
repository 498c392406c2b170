"""DataCaptureConfig and ShadowProductionVariants through boto3 over a fake backend: stored with the endpoint
config and echoed, kept by the endpoint and summarised by DescribeEndpoint (checked against botocore's output
shapes), and refused with the fix when pier could not honour them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.control.test_api import FAST
from tests.gateway.served import Served

CAPTURE = {"InitialSamplingPercentage": 20, "DestinationS3Uri": "s3://bucket/capture",
           "CaptureOptions": [{"CaptureMode": "InputAndOutput"}]}


def variant(name: str, model: str, weight: float = 1.0) -> dict[str, Any]:
    return {"VariantName": name, "ModelName": model, "InstanceType": "local", "InitialInstanceCount": 1,
            "InitialVariantWeight": weight}


@pytest.fixture
def models(sagemaker: Any, tmp_path: Path) -> Any:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.gguf").write_bytes(b"GGUF" + bytes(1024))
    for name in ("prod", "shadow"):
        sagemaker.create_model(ModelName=name, PrimaryContainer={"ModelDataUrl": str(folder)})
    return sagemaker


def test_shadow_and_capture_are_described_as_aws_does(models: Any, served: Served) -> None:
    models.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[variant("AllTraffic", "prod")],
                                  ShadowProductionVariants=[variant("Shadow", "shadow", 0.5)],
                                  DataCaptureConfig={**CAPTURE, "KmsKeyId": "alias/capture"})
    config = models.describe_endpoint_config(EndpointConfigName="c")
    assert config["DataCaptureConfig"] == {**CAPTURE, "KmsKeyId": "alias/capture"}
    assert config["ShadowProductionVariants"][0]["InitialVariantWeight"] == 0.5
    models.create_endpoint(EndpointName="e", EndpointConfigName="c")
    models.get_waiter("endpoint_in_service").wait(EndpointName="e", WaiterConfig=FAST)

    described = served.call("DescribeEndpoint", {"EndpointName": "e"})  # botocore's output shape
    assert [v["VariantName"] for v in described["ProductionVariants"]] == ["AllTraffic"]
    assert [(v["VariantName"], v["CurrentWeight"], v["CurrentInstanceCount"])
            for v in described["ShadowProductionVariants"]] == [("Shadow", 0.5, 1)]
    assert described["DataCaptureConfig"] == {
        "EnableCapture": True, "CaptureStatus": "Started", "CurrentSamplingPercentage": 20,
        "DestinationS3Uri": "s3://bucket/capture", "KmsKeyId": "alias/capture"}
    assert sorted(c.component for c in served.backend.statuses()) == ["e/AllTraffic", "e/Shadow"]


def test_update_endpoint_turns_capture_off(models: Any, served: Served) -> None:
    for name, enabled in (("on", True), ("off", False)):
        models.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[variant("AllTraffic", "prod")],
                                      DataCaptureConfig={**CAPTURE, "EnableCapture": enabled})
    models.create_endpoint(EndpointName="e", EndpointConfigName="on")
    models.get_waiter("endpoint_in_service").wait(EndpointName="e", WaiterConfig=FAST)
    models.update_endpoint(EndpointName="e", EndpointConfigName="off")
    models.get_waiter("endpoint_in_service").wait(EndpointName="e", WaiterConfig=FAST)
    summary = served.call("DescribeEndpoint", {"EndpointName": "e"})["DataCaptureConfig"]
    assert (summary["EnableCapture"], summary["CaptureStatus"], summary["KmsKeyId"]) == (False, "Stopped", "")


@pytest.mark.parametrize(("extra", "message"), [
    ({"DataCaptureConfig": {**CAPTURE, "DestinationS3Uri": "https://bucket.s3.amazonaws.com/x"}},
     "pier captures to s3://BUCKET/PREFIX"),
    ({"DataCaptureConfig": {**CAPTURE, "DestinationS3Uri": "file://relative/folder"}}, "file:///ABSOLUTE/FOLDER"),
    ({"DataCaptureConfig": {**CAPTURE, "DestinationS3Uri": "file:///srv/capture/%2e%2e/%2e%2e/etc"}},
     "has a '.' or '..' segment once percent-decoded"),
    ({"DataCaptureConfig": {**CAPTURE, "DestinationS3Uri": "file:///tmp/x", "KmsKeyId": "alias/k"}},
     "remove KmsKeyId, or capture to an s3:// destination"),
    ({"ShadowProductionVariants": [variant("Shadow", "shadow"), variant("Other", "shadow")]},
     "give exactly one variant in ProductionVariants and one in ShadowProductionVariants"),
    ({"ShadowProductionVariants": [variant("AllTraffic", "shadow")]}, "needs a name of its own"),
    ({"ShadowProductionVariants": [{"VariantName": "Shadow", "InstanceType": "local", "InitialInstanceCount": 1}]},
     "give ModelName in both"),
])
def test_what_pier_cannot_honour_is_refused_with_the_fix(models: Any, extra: dict[str, Any], message: str) -> None:
    with pytest.raises(ClientError) as raised:
        models.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[variant("AllTraffic", "prod")],
                                      **extra)
    assert raised.value.response["Error"]["Code"] == "ValidationException"
    assert message in raised.value.response["Error"]["Message"]
