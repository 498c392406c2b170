from __future__ import annotations

from pathlib import Path

import pytest

from pier.backends.base import CopyState, CopyStatus
from pier.control.records import ComponentRecord, EndpointRecord, RoutingRecord, VariantRecord
from pier.control.resource_store import ResourceStore
from pier.control.shapes import ComponentSpec, ContainerSpec
from pier.gateway.targets import COMPONENT_NOT_ALLOWED, COMPONENT_REQUIRED, NO_CAPACITY, Targets
from pier.runtime.errors import EndpointNotFound, InvalidInvocation
from pier.runtime.routing_strategy import Routing, Strategy

SPEC = ComponentSpec.model_validate({"ModelName": "m", "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 256}})


def endpoint(name: str, *variants: tuple[str, str | None, float], status: str = "InService") -> EndpointRecord:
    return EndpointRecord(name=name, arn=f"arn:{name}", created=1, modified=1, config_name="c", status=status,
                          variants=tuple(VariantRecord(name=v, instance_type="local", instance_count=1, weight=w,
                                                       model=m) for v, m, w in variants))


def component(name: str, on: str, status: str = "InService", copies: int = 1) -> ComponentRecord:
    return ComponentRecord(name=name, arn=f"arn:{name}", created=1, modified=1, endpoint=on, variant="AllTraffic",
                           status=status, specification=SPEC, container=ContainerSpec(), copies=copies)


@pytest.fixture
def targets(tmp_path: Path) -> Targets:
    state = ResourceStore.open(tmp_path)
    state.endpoints.put(endpoint("classic", ("AllTraffic", "m", 1.0)))
    state.endpoints.put(endpoint("ab", ("a", "m", 1.0), ("b", "m", 0.0)))
    state.endpoints.put(endpoint("host", ("AllTraffic", None, 1.0)))
    state.endpoints.put(endpoint("two", ("AllTraffic", None, 1.0)))
    state.endpoints.put(endpoint("empty", ("AllTraffic", None, 1.0)))  # made for components; none deployed yet
    state.endpoints.put(endpoint("going", ("AllTraffic", "m", 1.0), status="Deleting"))
    state.components.put(component("chat", "host"))
    state.components.put(component("x", "two"))
    state.components.put(component("y", "two"))
    state.components.put(component("old", "two", status="Deleting"))
    state.components.put(component("zero", "two", copies=0))

    def copies(workload: str) -> list[CopyStatus]:
        return [CopyStatus(f"{workload}-0", workload, CopyState.READY, "http://127.0.0.1:1")]

    return Targets(state, copies, pick=lambda weights: weights.index(max(weights)))


@pytest.mark.parametrize(("endpoint_name", "component_name", "variant", "expected"), [
    ("classic", None, None, ("classic/AllTraffic", "AllTraffic")),
    ("classic", None, "AllTraffic", ("classic/AllTraffic", "AllTraffic")),
    ("ab", None, None, ("ab/a", "a")),  # by weight (b has 0)
    ("ab", None, "b", ("ab/b", "b")),  # an explicit target variant wins over weights
    ("host", "chat", None, ("chat", "AllTraffic")),
    ("host", "CHAT", "AllTraffic", ("chat", "AllTraffic")),
    ("two", "y", None, ("y", "AllTraffic")),
    ("chat", None, None, ("chat", "AllTraffic")),  # an OpenAI `model` naming a component
])
def test_resolve(targets: Targets, endpoint_name: str, component_name: str | None, variant: str | None,
                 expected: tuple[str, str]) -> None:
    target = targets.resolve(endpoint_name, component_name, variant)
    assert (target.component, target.variant) == expected
    assert [c.component for c in target.copies] == [expected[0]]


@pytest.mark.parametrize(("endpoint_name", "component_name", "variant", "error", "words"), [
    ("nope", None, None, EndpointNotFound, "Endpoint nope of account 000000000000 not found."),
    ("going", None, None, EndpointNotFound, "Endpoint going of account"),
    ("two", None, None, InvalidInvocation, COMPONENT_REQUIRED),
    # As on SageMaker, even an endpoint with one component needs its name (pier used to spare the header).
    ("host", None, None, InvalidInvocation, COMPONENT_REQUIRED),
    ("empty", None, None, InvalidInvocation, COMPONENT_REQUIRED),
    ("two", "old", None, InvalidInvocation, "Inference component old is not on endpoint two"),
    ("two", "chat", None, InvalidInvocation, "Inference component chat is not on endpoint two"),
    ("two", "zero", None, InvalidInvocation, NO_CAPACITY),
    ("zero", None, None, InvalidInvocation, NO_CAPACITY),  # an OpenAI `model` naming it
    ("classic", "chat", None, InvalidInvocation, COMPONENT_NOT_ALLOWED),
    ("ab", None, "c", InvalidInvocation, "Endpoint ab has no variant c; its variants: a, b. Check TargetVariant."),
    ("host", "chat", "blue", InvalidInvocation, "Endpoint host has no variant blue; its variants: AllTraffic."),
])
def test_resolve_errors(targets: Targets, endpoint_name: str, component_name: str | None, variant: str | None,
                        error: type[Exception], words: str) -> None:
    with pytest.raises(error) as raised:
        targets.resolve(endpoint_name, component_name, variant)
    assert words in str(raised.value)


@pytest.mark.parametrize(("record", "expected"), [
    (None, Routing()),
    (RoutingRecord(strategy="RANDOM"), Routing(Strategy.RANDOM)),
    (RoutingRecord(strategy="PREFIX_AWARE", prefix_length=2048, concurrency_threshold=3),
     Routing(Strategy.PREFIX_AWARE, 2048, 3)),
])
def test_a_variants_routing_config_reaches_its_targets_and_its_components(
        tmp_path: Path, record: RoutingRecord | None, expected: Routing) -> None:
    state = ResourceStore.open(tmp_path)
    host = endpoint("host", ("AllTraffic", None, 1.0))
    classic = endpoint("classic", ("AllTraffic", "m", 1.0))
    for stored in (host, classic):
        state.endpoints.put(stored.model_copy(update={"variants": (
            stored.variants[0].model_copy(update={"routing": record}),)}))
    state.components.put(component("chat", "host"))
    targets = Targets(state, lambda workload: [])
    assert targets.resolve("classic", None, None).routing == expected
    assert targets.resolve("host", "chat", None).routing == expected
