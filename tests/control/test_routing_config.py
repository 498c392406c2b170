"""RoutingConfig on a production variant through boto3: stored with the endpoint config, echoed by
DescribeEndpointConfig, kept by the endpoint, and refused in SageMaker's shape when it is incomplete."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.gateway.served import Served

PREFIX_AWARE = {"RoutingStrategy": "PREFIX_AWARE",
                "PrefixAwareRoutingConfig": {"PrefixLength": 2048, "ConcurrencyThreshold": 3}}


def variant(routing: dict[str, Any] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"VariantName": "AllTraffic", "InstanceType": "local", "InitialInstanceCount": 1}
    if routing is not None:
        spec["RoutingConfig"] = routing
    return spec


@pytest.mark.parametrize("routing", [
    {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}, {"RoutingStrategy": "RANDOM"},
    {"RoutingStrategy": "KV_AWARE"}, PREFIX_AWARE,
])
def test_routing_config_is_stored_and_described(sagemaker: Any, served: Served, routing: dict[str, Any]) -> None:
    sagemaker.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[variant(routing)])
    described = sagemaker.describe_endpoint_config(EndpointConfigName="c")
    assert described["ProductionVariants"][0]["RoutingConfig"] == routing
    sagemaker.create_endpoint(EndpointName="e", EndpointConfigName="c")
    from pier.control.resource_store import ResourceStore  # the endpoint keeps its own copy, as it keeps its variants

    stored = ResourceStore.open(served.state_dir).endpoints.get("e")
    assert stored is not None and stored.variants[0].routing is not None
    assert stored.variants[0].routing.strategy == routing["RoutingStrategy"]


@pytest.mark.parametrize(("routing", "message"), [
    ({"RoutingStrategy": "PREFIX_AWARE"}, "RoutingStrategy PREFIX_AWARE needs PrefixAwareRoutingConfig"),
    ({"RoutingStrategy": "PREFIX_AWARE", "PrefixAwareRoutingConfig": {"PrefixLength": 2048}},
     "needs PrefixAwareRoutingConfig with PrefixLength"),
    ({"RoutingStrategy": "RANDOM", "PrefixAwareRoutingConfig": {"PrefixLength": 2048, "ConcurrencyThreshold": 1}},
     "PrefixAwareRoutingConfig applies only to RoutingStrategy PREFIX_AWARE, not RANDOM"),
    ({"RoutingStrategy": "ROUND_ROBIN"}, "Member must satisfy enum value set"),
])
def test_bad_routing_configs_are_refused(sagemaker: Any, routing: dict[str, Any], message: str) -> None:
    with pytest.raises(ClientError) as raised:
        sagemaker.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[variant(routing)])
    assert raised.value.response["Error"]["Code"] == "ValidationException"
    assert message in raised.value.response["Error"]["Message"]


def test_a_prefix_length_below_awss_minimum_is_refused_in_its_words(served: Served) -> None:
    # boto3 refuses it before sending; other clients send it, and SageMaker's validation layer answers.
    routing = {"RoutingStrategy": "PREFIX_AWARE",
               "PrefixAwareRoutingConfig": {"PrefixLength": 100, "ConcurrencyThreshold": 1}}
    reply = served.call("CreateEndpointConfig", {"EndpointConfigName": "c", "ProductionVariants": [variant(routing)]},
                        expect=400)
    assert reply["__type"].endswith("ValidationException")
    assert ("Value '100' at 'productionVariants.1.member.routingConfig.prefixAwareRoutingConfig.prefixLength' failed "
            "to satisfy constraint: Member must have value greater than or equal to 1024") in reply["message"]
