"""What Describe* and List* return, shaped as botocore's output shapes want (required members always set,
timestamps as epoch seconds)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pier.backends.base import CopyState, CopyStatus
from pier.control import data_capture
from pier.control.deployment import green_share, instances, phase, policy_of
from pier.control.listing import Row
from pier.control.names import arn
from pier.control.records import (
    ComponentRecord,
    ConfigRecord,
    DeploymentRecord,
    EndpointRecord,
    ModelRecord,
    VariantRecord,
)
from pier.control.workload import Workload
from pier.state_folder.rows import BadRow

Copies = Callable[[Workload], list[CopyStatus]]


def ready(copies: list[CopyStatus]) -> int:
    return sum(1 for c in copies if c.state is CopyState.READY)


def region(record_arn: str) -> str:
    return record_arn.split(":")[3]


def model(record: ModelRecord) -> dict[str, Any]:
    return {**record.request.wire(), "ModelArn": record.arn, "CreationTime": record.created}


def config(record: ConfigRecord) -> dict[str, Any]:
    return {**record.request.wire(), "EndpointConfigArn": record.arn, "CreationTime": record.created}


def endpoint(record: EndpointRecord, copies: Copies) -> dict[str, Any]:
    kept = 1.0 - green_share(record.deployment) if record.deployment is not None else 1.0  # the rest is the update's
    described: dict[str, Any] = {
        "EndpointName": record.name,
        "EndpointArn": record.arn,
        "EndpointConfigName": record.config_name,
        "ProductionVariants": [_variant(record, v, copies, kept) for v in record.variants if not v.shadow],
        "EndpointStatus": record.status,
        "CreationTime": record.created,
        "LastModifiedTime": record.modified,
    }
    if shadows := [_variant(record, v, copies) for v in record.variants if v.shadow]:
        described["ShadowProductionVariants"] = shadows
    if record.data_capture is not None:
        described["DataCaptureConfig"] = data_capture.summary(record.data_capture)
    if record.failure_reason:
        described["FailureReason"] = record.failure_reason
    if record.async_inference is not None:
        described["AsyncInferenceConfig"] = record.async_inference.wire()
    if record.last_deployment_config:
        described["LastDeploymentConfig"] = record.last_deployment_config
    if record.deployment is not None and record.status != "Deleting":
        described["PendingDeploymentSummary"] = _pending(record, record.deployment, copies)
    return described


def _pending(record: EndpointRecord, pending: DeploymentRecord, copies: Copies) -> dict[str, Any]:
    """The update in progress: the new fleet's variants, with the weight they carry now (their share of the
    traffic moved so far) and where the update stands."""
    moved = green_share(pending)
    status = [{"Status": "Baking" if pending.step >= 0 else "Creating",
               "StatusMessage": phase(pending.step, policy_of(pending.config, instances(pending.variants))),
               "StartTime": pending.since}]
    summary: dict[str, Any] = {"EndpointConfigName": pending.config_name, "ProductionVariants": [
        {**_variant(record, v, copies, moved), "VariantStatus": status} for v in pending.variants if not v.shadow],
        "StartTime": pending.started}
    # The new config's shadows have a list of their own, as DescribeEndpoint's own ShadowProductionVariants.
    if shadows := [{**_variant(record, v, copies, moved), "VariantStatus": status}
                   for v in pending.variants if v.shadow]:
        summary["ShadowProductionVariants"] = shadows
    return summary


def _variant(record: EndpointRecord, variant: VariantRecord, copies: Copies, share: float = 1.0) -> dict[str, Any]:
    if variant.model is not None:
        current = ready(copies(variant.workload(record.name)))
    else:  # an endpoint for components: its instances are budgets on this host, there as soon as it exists
        current = 0 if record.status == "Creating" else variant.instance_count
    summary: dict[str, Any] = {
        "VariantName": variant.name,
        "CurrentWeight": variant.weight * share,
        "DesiredWeight": variant.weight,
        "CurrentInstanceCount": current,
        "DesiredInstanceCount": variant.instance_count,
    }
    image = variant.container.Image if variant.container else None
    if image:
        summary["DeployedImages"] = [_deployed(image, record.created)]
    return summary


def _deployed(image: str, when: float) -> dict[str, Any]:
    # pier runs its own model server for every image; the image is recorded as the user named it.
    return {"SpecifiedImage": image, "ResolvedImage": image, "ResolutionTime": when}


def component(record: ComponentRecord, copies: Copies) -> dict[str, Any]:
    running = copies(Workload.of_component(record.name))
    described: dict[str, Any] = {
        "InferenceComponentName": record.name,
        "InferenceComponentArn": record.arn,
        "EndpointName": record.endpoint,
        "EndpointArn": arn("endpoint", record.endpoint, region(record.arn)),
        "VariantName": record.variant,
        "Specification": _specification(record),
        "RuntimeConfig": {"DesiredCopyCount": record.copies, "CurrentCopyCount": ready(running)},
        "CreationTime": record.created,
        "LastModifiedTime": record.modified,
        "InferenceComponentStatus": record.status,
    }
    if record.failure_reason:
        described["FailureReason"] = record.failure_reason
    if record.specification.BaseInferenceComponentName is not None:  # an adapter runs on its base's copies
        del described["RuntimeConfig"]
    return described


def _specification(record: ComponentRecord) -> dict[str, Any]:
    given = record.specification.wire()
    spec: dict[str, Any] = {k: v for k, v in given.items() if k != "Container"}
    container = record.specification.Container
    if container is not None:
        summary: dict[str, Any] = {"Environment": container.Environment}
        if container.ArtifactUrl:
            summary["ArtifactUrl"] = container.ArtifactUrl
        if container.Image:
            summary["DeployedImage"] = _deployed(container.Image, record.created)
        spec["Container"] = summary
    return spec


# ---- List* rows


def model_row(record: ModelRecord) -> Row:
    summary = {"ModelName": record.name, "ModelArn": record.arn, "CreationTime": record.created}
    return Row(record.name, record.created, summary)


def config_row(record: ConfigRecord) -> Row:
    summary = {"EndpointConfigName": record.name, "EndpointConfigArn": record.arn, "CreationTime": record.created}
    return Row(record.name, record.created, summary)


def endpoint_row(record: EndpointRecord) -> Row:
    summary = {
        "EndpointName": record.name, "EndpointArn": record.arn, "CreationTime": record.created,
        "LastModifiedTime": record.modified, "EndpointStatus": record.status,
    }
    return Row(record.name, record.created, summary, record.modified, record.status)


def component_row(record: ComponentRecord) -> Row:
    summary = {
        "InferenceComponentName": record.name, "InferenceComponentArn": record.arn,
        "EndpointName": record.endpoint, "EndpointArn": arn("endpoint", record.endpoint, region(record.arn)),
        "VariantName": record.variant, "InferenceComponentStatus": record.status,
        "CreationTime": record.created, "LastModifiedTime": record.modified,
    }
    labels = {"EndpointName": record.endpoint, "VariantName": record.variant}
    return Row(record.name, record.created, summary, record.modified, record.status, labels)


# ---- records that do not read (state.BadRow): what is known of them, Failed with why


def unreadable_endpoint(row: BadRow, region: str) -> dict[str, Any]:
    """DescribeEndpoint of an endpoint whose stored record does not read."""
    return {
        "EndpointName": row.name,
        "EndpointArn": row.text("arn") or arn("endpoint", row.name, region),
        "EndpointConfigName": row.text("config_name"),
        "ProductionVariants": [],
        "EndpointStatus": "Failed",
        "FailureReason": row.failure_reason,
        "CreationTime": row.created,
        "LastModifiedTime": row.number("modified", row.created),
    }


def unreadable_component(row: BadRow, region: str) -> dict[str, Any]:
    """DescribeInferenceComponent of a component whose stored record does not read."""
    endpoint = row.text("endpoint")
    return {
        "InferenceComponentName": row.name,
        "InferenceComponentArn": row.text("arn") or arn("inference component", row.name, region),
        "EndpointName": endpoint,
        "EndpointArn": arn("endpoint", endpoint, region),
        "VariantName": row.text("variant"),
        "CreationTime": row.created,
        "LastModifiedTime": row.number("modified", row.created),
        "InferenceComponentStatus": "Failed",
        "FailureReason": row.failure_reason,
    }


def unreadable_row(row: BadRow, region: str) -> Row:
    """A List* entry for a record that does not read: Failed where the summary has a status, and in every case
    a FailureReason beside the modelled members (boto3 skips it; pier's CLI and raw JSON show it)."""
    resource = {"model": "Model", "endpoint configuration": "EndpointConfig", "endpoint": "Endpoint",
                "inference component": "InferenceComponent"}[row.kind]
    summary: dict[str, Any] = {f"{resource}Name": row.name, f"{resource}Arn": row.text("arn") or arn(
        row.kind, row.name, region), "CreationTime": row.created, "FailureReason": row.failure_reason}
    status = None
    labels: dict[str, str] = {}
    if row.kind in ("endpoint", "inference component"):
        status = "Failed"
        summary[f"{resource}Status"] = status
        summary["LastModifiedTime"] = row.number("modified", row.created)
    if row.kind == "inference component":
        endpoint = row.text("endpoint")
        summary |= {"EndpointName": endpoint, "EndpointArn": arn("endpoint", endpoint, region),
                    "VariantName": row.text("variant")}
        labels = {"EndpointName": endpoint, "VariantName": row.text("variant")}
    return Row(row.name, row.created, summary, row.number("modified", row.created), status, labels)
