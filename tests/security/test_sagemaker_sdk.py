"""The sagemaker SDK, as a SageMaker user runs it, with a created access key: Model.deploy, Predictor.predict,
delete; and the same session with a wrong secret fails with AWS's error."""

from __future__ import annotations

import os
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from tests.security.conftest import GENERATE, REGION, WAIT, Secured

os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")  # the seeds use SDK v2
sagemaker_sdk = pytest.importorskip("sagemaker", reason="the sagemaker SDK is in the test extra")


def session(secured: Secured, who: str, secret: str | None = None) -> Any:
    key = secured.keys[who]
    boto_session = boto3.Session(aws_access_key_id=key.stored.access_key_id,
                                 aws_secret_access_key=secret or key.secret_access_key, region_name=REGION)
    return sagemaker_sdk.Session(
        boto_session, sagemaker_client=boto_session.client("sagemaker", endpoint_url=secured.url),
        sagemaker_runtime_client=boto_session.client("sagemaker-runtime", endpoint_url=secured.url))


def test_the_sdk_deploys_predicts_and_deletes_with_a_created_key(secured: Secured) -> None:
    from sagemaker.deserializers import JSONDeserializer
    from sagemaker.model import Model
    from sagemaker.predictor import Predictor
    from sagemaker.serializers import JSONSerializer

    admin = session(secured, "admin")
    model = Model(image_uri="pier", model_data=f"file://{secured.model_dir}", name="sdk-model",
                  role="arn:aws:iam::111122223333:role/sagemaker", sagemaker_session=admin)
    model.deploy(initial_instance_count=1, instance_type="ml.c7g.large", endpoint_name="sdk", wait=False)
    admin.sagemaker_client.get_waiter("endpoint_in_service").wait(EndpointName="sdk", WaiterConfig=WAIT)

    predictor = Predictor("sdk", sagemaker_session=session(secured, "invoker"), serializer=JSONSerializer(),
                          deserializer=JSONDeserializer())
    assert predictor.predict(GENERATE)[0]["generated_text"]

    Predictor("sdk", sagemaker_session=admin).delete_endpoint()
    admin.sagemaker_client.get_waiter("endpoint_deleted").wait(EndpointName="sdk", WaiterConfig=WAIT)


def test_the_sdk_with_a_wrong_secret_or_an_invoke_key(secured: Secured) -> None:
    from sagemaker.model import Model

    for who, secret, code in [("admin", "wrong-secret", "InvalidSignatureException"),
                              ("invoker", None, "AccessDeniedException")]:
        model = Model(image_uri="pier", model_data=f"file://{secured.model_dir}", name="sdk-model",
                      role="arn:aws:iam::111122223333:role/sagemaker",
                      sagemaker_session=session(secured, who, secret))
        with pytest.raises(ClientError) as raised:
            model.deploy(initial_instance_count=1, instance_type="ml.c7g.large", endpoint_name="sdk", wait=False)
        assert raised.value.response["Error"]["Code"] == code
