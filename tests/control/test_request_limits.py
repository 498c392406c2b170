"""SageMaker's limits, read from botocore's model and checked against botocore itself: the numbers in each test
come from the installed botocore, so a limit pier got wrong (or botocore changed) fails here."""

from __future__ import annotations

from typing import Any

import botocore.session
import pytest

from pier.control.api import OPERATIONS
from pier.control.errors import SerializationError, ValidationError
from pier.control.request_limits import (
    ENVIRONMENT_TOTAL_BYTES,
    MAX_BODY_BYTES,
    MAX_DEPTH,
    check_request,
    parse_body,
)

MODEL = botocore.session.get_session().get_service_model("sagemaker")


def limit(shape: str, key: str = "max") -> int:
    return int(MODEL.shape_for(shape).metadata[key])


def refused(operation: str, body: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as raised:
        check_request(operation, body)
    return raised.value.message


def container(**fields: Any) -> dict[str, Any]:
    return {"ModelName": "m", "PrimaryContainer": {"ModelDataUrl": "/m", **fields}}


def test_a_name_over_botocores_length_reads_exactly_like_aws() -> None:
    most = limit("ModelName")
    assert most == 63
    check_request("CreateModel", {"ModelName": "m" * most})
    assert refused("CreateModel", {"ModelName": "m" * (most + 1)}) == (
        f"1 validation error detected: Value '{'m' * (most + 1)}' at 'modelName' failed to satisfy constraint: "
        f"Member must have length less than or equal to {most}")


@pytest.mark.parametrize(("operation", "member", "shape"), [
    ("CreateEndpoint", "EndpointName", "EndpointName"),
    ("CreateEndpointConfig", "EndpointConfigName", "EndpointConfigName"),
    ("CreateInferenceComponent", "InferenceComponentName", "InferenceComponentName"),
])
def test_every_name_is_held_to_botocores_length(operation: str, member: str, shape: str) -> None:
    too_long = "a" * (limit(shape) + 1)
    assert f"Member must have length less than or equal to {limit(shape)}" in refused(operation, {member: too_long})


def test_environment_entries_are_bounded_as_botocore_says() -> None:
    most = limit("EnvironmentMap")
    assert most == 100
    check_request("CreateModel", container(Environment={f"K{i}": "v" for i in range(most)}))
    message = refused("CreateModel", container(Environment={f"K{i}": "v" for i in range(most + 1)}))
    assert f"at 'primaryContainer.environment' failed to satisfy constraint: Member must have length less than or " \
           f"equal to {most}" in message
    key_max, value_max = limit("EnvironmentKey"), limit("EnvironmentValue")
    message = refused("CreateModel", container(Environment={"K" * (key_max + 1): "v", "V": "x" * (value_max + 1)}))
    assert message.startswith("2 validation errors detected")
    assert f"Map keys must satisfy constraint: [Member must have length less than or equal to {key_max}]" in message
    assert f"Map value must satisfy constraint: [Member must have length less than or equal to {value_max}]" in message


def test_environment_keys_follow_botocores_pattern_and_values_hold_no_nul() -> None:
    pattern = MODEL.shape_for("EnvironmentKey").metadata["pattern"]
    message = refused("CreateModel", container(Environment={"NOT-A-NAME": "v", "A=B": "v"}))
    assert f"Member must satisfy regular expression pattern: ^{pattern}$" in message
    assert "no process environment can hold one" in refused("CreateModel", container(Environment={"A": "x\x00y"}))


def test_all_environment_maps_together_hold_at_most_32_kb() -> None:
    value_max = limit("EnvironmentValue")
    fits = {f"K{i}": "v" * value_max for i in range(ENVIRONMENT_TOTAL_BYTES // (value_max + 4) - 1)}
    check_request("CreateModel", container(Environment=fits))
    over = {f"K{i}": "v" * value_max for i in range(40)}
    assert "SageMaker allows at most 32768 (32 KB)" in refused("CreateModel", container(Environment=over))
    spec = {"ModelName": "m", "Container": {"Environment": over},
            "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 1024}}
    assert "32 KB" in refused("CreateInferenceComponent", {"InferenceComponentName": "c", "EndpointName": "e",
                                                           "Specification": spec})


def test_lists_are_bounded_as_botocore_says() -> None:
    tags = limit("TagList")
    assert tags == 50
    many = [{"Key": f"k{i}", "Value": "v"} for i in range(tags + 1)]
    assert f"at 'tags' failed to satisfy constraint: Member must have length less than or equal to {tags}" in refused(
        "CreateModel", {"ModelName": "m", "Tags": many})
    variants = limit("ProductionVariantList")
    body = {"EndpointConfigName": "c", "ProductionVariants": [
        {"VariantName": f"v{i}", "InstanceType": "local", "InitialInstanceCount": 1} for i in range(variants + 1)]}
    assert "at 'productionVariants'" in refused("CreateEndpointConfig", body)
    assert "at 'tags.1.member.key' failed to satisfy constraint: Member must have length greater than or equal to 1" \
        in refused("CreateModel", {"ModelName": "m", "Tags": [{"Key": "", "Value": "v"}]})


def _max_results_shape(operation: str) -> str:
    return str(MODEL.operation_model(operation).input_shape.members["MaxResults"].name)


@pytest.mark.parametrize("operation", [op for op in OPERATIONS
                                       if op.startswith("List") and _max_results_shape(op) == "MaxResults"])
def test_list_sizes_are_botocores(operation: str) -> None:
    low, high = limit("MaxResults", "min"), limit("MaxResults")
    assert (low, high) == (1, 100)
    check_request(operation, {"MaxResults": high})
    assert f"Member must have value less than or equal to {high}" in refused(operation, {"MaxResults": high + 1})
    assert f"Member must have value greater than or equal to {low}" in refused(operation, {"MaxResults": low - 1})


def test_list_tags_takes_pages_of_at_least_fifty_as_botocore_says() -> None:
    low = limit("ListTagsMaxResults", "min")
    assert _max_results_shape("ListTags") == "ListTagsMaxResults" and low == 50
    check_request("ListTags", {"ResourceArn": "arn:aws:sagemaker:us-east-1:000000000000:model/m", "MaxResults": low})
    assert f"Member must have value greater than or equal to {low}" in refused("ListTags", {"MaxResults": low - 1})


def test_numbers_ranges_and_enums() -> None:
    body = {"InferenceComponentName": "c", "DesiredRuntimeConfig": {"CopyCount": -1}}
    assert "at 'desiredRuntimeConfig.copyCount' failed to satisfy constraint: Member must have value greater than " \
           "or equal to 0" in refused("UpdateInferenceComponentRuntimeConfig", body)
    enum = MODEL.shape_for("ModelSortKey").enum
    assert f"Member must satisfy enum value set: [{', '.join(enum)}]" in refused("ListModels", {"SortBy": "Status"})
    check_request("ListEndpoints", {"SortBy": "Status"})  # EndpointSortKey has it
    # pier's own instance types widen botocore's enum
    check_request("CreateEndpointConfig", {"EndpointConfigName": "c", "ProductionVariants": [
        {"VariantName": "v", "InstanceType": "local", "InitialInstanceCount": 1}]})


@pytest.mark.parametrize(("body", "words"), [
    ({"InferenceComponentName": "c", "DesiredRuntimeConfig": {"CopyCount": "2"}},
     "STRING_VALUE can not be converted to an Integer (at 'desiredRuntimeConfig.copyCount')"),
    ({"InferenceComponentName": "c", "DesiredRuntimeConfig": {"CopyCount": True}}, "BOOLEAN_VALUE can not be"),
    ({"InferenceComponentName": "c", "DesiredRuntimeConfig": {"CopyCount": 2**31}}, "out of range of Integer"),
    ({"InferenceComponentName": "c", "DesiredRuntimeConfig": [1]}, "START_ARRAY can not be converted to a Structure"),
    ({"InferenceComponentName": ["c"]}, "START_ARRAY can not be converted to a String"),
])
def test_a_member_of_the_wrong_json_type_is_a_serialization_error(body: dict[str, Any], words: str) -> None:
    with pytest.raises(SerializationError) as raised:
        check_request("UpdateInferenceComponentRuntimeConfig", body)
    assert words in raised.value.message


def test_members_botocore_does_not_model_are_left_to_the_shape() -> None:
    check_request("CreateModel", {**container(), "PierExtra": {"deep": [1, 2, {"x": None}]}})
    check_request("CreateModel", {**container(), "ExecutionRoleArn": "arn:x"})  # pier has no IAM: any role
    check_request("NotAnOperation", {"anything": 1})


def _depth(shape: Any, seen: frozenset[str] = frozenset()) -> int:
    if shape.name in seen:
        return 0
    seen = seen | {shape.name}
    match shape.type_name:
        case "structure":
            return 1 + max((_depth(m, seen) for m in shape.members.values()), default=0)
        case "list":
            return 1 + _depth(shape.member, seen)
        case "map":
            return 1 + _depth(shape.value, seen)
        case _:
            return 0


def test_the_depth_limit_leaves_room_for_every_served_request() -> None:
    deepest = max(_depth(MODEL.operation_model(op).input_shape) for op in OPERATIONS)
    assert deepest + 4 <= MAX_DEPTH


@pytest.mark.parametrize(("raw", "words"), [
    (b"[" * 100_000, "nests JSON too deeply"),
    (b'{"a": ' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}", "nests JSON too deeply"),
    (b'{"a": NaN}', "NaN is not a JSON number"),
    (b'{"a": -Infinity}', "Infinity is not a JSON number"),
    (b'{"a": 1e999}', "too large for a double"),
    (b'{"a": "\\ud800"}', "lone UTF-16 surrogate"),
    (b'{"\\udfff": 1}', "lone UTF-16 surrogate"),
    (b'{"a": ' + b"9" * 5000 + b"}", "not JSON"),
    (b'{"a": "\xff\xfe"}', "not JSON"),
    (b"[1, 2]", "must be a JSON object"),
    (b'"text"', "must be a JSON object"),
    (b"{", "not JSON"),
])
def test_hostile_raw_bodies_are_serialization_errors(raw: bytes, words: str) -> None:
    with pytest.raises(SerializationError) as raised:
        parse_body(raw)
    assert words in raised.value.message


def test_a_body_over_the_limit_is_refused_before_parsing() -> None:
    with pytest.raises(ValidationError, match=f"at most {MAX_BODY_BYTES} bytes"):
        parse_body(b" " * (MAX_BODY_BYTES + 1))
    assert parse_body(b"") == {} and parse_body(b'{"a": "\\u00e9\\ud83d\\ude00"}') == {"a": "é😀"}
