"""The SageMaker control-plane operations pier serves (JSON 1.1, `X-Amz-Target: SageMaker.<Operation>`).

Each operation validates its request, changes the stored state, and wakes the reconciler, which does the
slow part (fetching the model, starting copies) and moves the statuses. Errors carry SageMaker's `__type`
and wording, so boto3 raises the same exceptions and its waiters decide the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pier.control import deployment, descriptions
from pier.control.capacity import CopyCap
from pier.control.component_operations import ComponentOperations
from pier.control.deployment import deployment_config, retained
from pier.control.errors import (
    ResourceInUse,
    ResourceLimitExceeded,
    UnknownOperation,
    ValidationError,
    already_exists,
    not_found,
)
from pier.control.instance_types import lookup, warn_if_oversize
from pier.control.names import arn
from pier.control.records import (
    IN_PROGRESS,
    ConfigRecord,
    DeploymentRecord,
    EndpointRecord,
    ModelRecord,
    RoutingRecord,
    VariantRecord,
)
from pier.control.request_limits import check_request, load_model
from pier.control.resource_store import ResourceStore, UnreadableRecord
from pier.control.resources import Body, check_source, classic_copies
from pier.control.shapes import (
    CreateEndpointConfigInput,
    CreateEndpointInput,
    CreateModelInput,
    EndpointConfigNameInput,
    EndpointNameInput,
    ModelNameInput,
    RoutingConfigSpec,
    UpdateEndpointInput,
    UpdateEndpointWeightsAndCapacitiesInput,
)
from pier.control.tags import TagOperations, tags_of
from pier.control.validation_message import parse


class ControlPlane(ComponentOperations, TagOperations):
    """Every operation by its SageMaker name; the model, endpoint config and endpoint ones here, the inference
    component ones in component_operations.py, the tag ones in tags.py, what they share in resources.py."""

    def __init__(self, state: ResourceStore, *, copies: descriptions.Copies, wake: Callable[[], None] = lambda: None,
                 clock: Callable[[], float] = time.time, copy_cap: CopyCap | None = None,
                 on_this_host: bool = True) -> None:
        super().__init__(state, copies=copies, wake=wake, clock=clock, copy_cap=copy_cap, on_this_host=on_this_host)
        load_model()  # before the gateway serves: the first request must not read botocore's model on the loop
        self.operations: dict[str, Callable[[Body, str], Body]] = {
            name: getattr(self, _snake(name)) for name in OPERATIONS
        }

    def call(self, operation: str, body: Body, region: str) -> Body:
        handler = self.operations.get(operation)
        if handler is None:
            raise UnknownOperation(
                f"pier does not serve SageMaker.{operation}; it serves {', '.join(sorted(OPERATIONS))}."
            )
        check_request(operation, body)
        with self.state.transaction():  # an operation's writes land together or not at all
            return handler(body, region)

    # ---- models

    def create_model(self, body: Body, region: str) -> Body:
        request = parse(CreateModelInput, body)
        check_source(request.container)
        record = ModelRecord(name=request.ModelName, arn=arn("model", request.ModelName, region),
                             created=self.clock(), request=request, tags=tags_of(request))
        if not self.state.models.insert(record):
            raise already_exists("model", record.arn)
        return {"ModelArn": record.arn}

    def describe_model(self, body: Body, region: str) -> Body:
        return descriptions.model(self._model(parse(ModelNameInput, body).ModelName, region))

    def delete_model(self, body: Body, region: str) -> Body:
        name = parse(ModelNameInput, body).ModelName
        if not self.state.models.delete(name):
            raise not_found("model", arn("model", name, region))
        return {}

    def list_models(self, body: Body, region: str) -> Body:
        records, unreadable = self.state.models.scan()
        return self._list(body, "Models", [descriptions.model_row(r) for r in records], unreadable, region)

    # ---- endpoint configs

    def create_endpoint_config(self, body: Body, region: str) -> Body:
        request = parse(CreateEndpointConfigInput, body)
        for variant in (*request.ProductionVariants, *(request.ShadowProductionVariants or [])):
            itype = lookup(variant.InstanceType or "")
            if self.on_this_host:
                warn_if_oversize(itype)
            if variant.ModelName is not None:
                self._model(variant.ModelName, region)
        record = ConfigRecord(name=request.EndpointConfigName, created=self.clock(), request=request,
                              tags=tags_of(request),
                              arn=arn("endpoint configuration", request.EndpointConfigName, region))
        if not self.state.configs.insert(record):
            raise already_exists("endpoint configuration", record.arn)
        return {"EndpointConfigArn": record.arn}

    def describe_endpoint_config(self, body: Body, region: str) -> Body:
        return descriptions.config(self._config(parse(EndpointConfigNameInput, body).EndpointConfigName))

    def delete_endpoint_config(self, body: Body, region: str) -> Body:
        name = parse(EndpointConfigNameInput, body).EndpointConfigName
        if not self.state.configs.delete(name):
            raise not_found("endpoint configuration", name)
        return {}

    def list_endpoint_configs(self, body: Body, region: str) -> Body:
        records, unreadable = self.state.configs.scan()
        return self._list(body, "EndpointConfigs", [descriptions.config_row(r) for r in records], unreadable, region)

    # ---- endpoints

    def create_endpoint(self, body: Body, region: str) -> Body:
        request = parse(CreateEndpointInput, body)
        now = self.clock()
        record = EndpointRecord(
            name=request.EndpointName, arn=arn("endpoint", request.EndpointName, region), created=now, modified=now,
            config_name=request.EndpointConfigName, variants=self._variants(request.EndpointConfigName, region),
            data_capture=self._config(request.EndpointConfigName).request.DataCaptureConfig,
            async_inference=self._config(request.EndpointConfigName).request.AsyncInferenceConfig,
            tags=tags_of(request),
        )
        self._check_copy_cap(classic_copies(record.variants))
        if not self.state.endpoints.insert(record):
            raise already_exists("endpoint", record.arn)
        self.wake()
        return {"EndpointArn": record.arn}

    def describe_endpoint(self, body: Body, region: str) -> Body:
        try:
            return descriptions.endpoint(self._endpoint(parse(EndpointNameInput, body).EndpointName), self.copies)
        except UnreadableRecord as unreadable:
            return descriptions.unreadable_endpoint(unreadable.row, region)

    def delete_endpoint(self, body: Body, region: str) -> Body:
        name = parse(EndpointNameInput, body).EndpointName
        try:
            record = self._endpoint(name)
        except UnreadableRecord as unreadable:
            record = None
            name = unreadable.row.name
        hosted = [c.name for c in self.state.components.all() if c.endpoint.lower() == name.lower()]
        if hosted:
            raise ResourceInUse(
                f'Endpoint "{name}" still hosts inference components ({", ".join(hosted)}): delete them '
                "with DeleteInferenceComponent and wait until they are gone, then delete the endpoint."
            )
        if record is None:  # nothing to wind down that pier can read: the row goes, and with it its copies
            self._forget("endpoint", self.state.endpoints.delete, name)
        else:
            self._put_endpoint(record, status="Deleting")
        return {}

    def list_endpoints(self, body: Body, region: str) -> Body:
        records, unreadable = self.state.endpoints.scan()
        return self._list(body, "Endpoints", [descriptions.endpoint_row(r) for r in records], unreadable, region)

    def update_endpoint(self, body: Body, region: str) -> Body:
        request = parse(UpdateEndpointInput, body)
        record = self._endpoint(request.EndpointName)
        self._check_not_in_progress(record)
        variants = self._variants(request.EndpointConfigName, region)
        self._check_keeps_components(record, request.EndpointConfigName, variants)
        variants = retained(record.variants, variants, request)
        capture = self._config(request.EndpointConfigName).request.DataCaptureConfig
        asynchronous = self._config(request.EndpointConfigName).request.AsyncInferenceConfig
        if not classic_copies(variants):  # no copies of its own to swap: the config applies at once
            self._check_copy_cap(-classic_copies(record.variants))
            self._put_endpoint(record, status="Updating", config_name=request.EndpointConfigName, variants=variants,
                               data_capture=capture, async_inference=asynchronous)
            return {"EndpointArn": record.arn}
        config = deployment_config(record, request)
        problem = deployment.check(config, classic_copies(variants))
        if problem:
            raise ValidationError(problem)
        try:  # the new fleet runs beside the old one until traffic has moved to it
            self._check_copy_cap(classic_copies(variants))
        except ResourceLimitExceeded as error:
            raise ResourceLimitExceeded(
                f"UpdateEndpoint starts the new config's {classic_copies(variants)} copies beside the "
                f"{classic_copies(record.variants)} now serving, and this host cannot hold both: {error.message}"
            ) from None
        fleet = str(record.fleets + 1)
        now = self.clock()
        pending = DeploymentRecord(config_name=request.EndpointConfigName, config=config, started=now, since=now,
                                   data_capture=capture, async_inference=asynchronous,
                                   variants=tuple(v.model_copy(update={"fleet": fleet}) for v in variants),
                                   was="Failed" if record.status == "Failed" else "InService")
        self._put_endpoint(record, status="Updating", deployment=pending, fleets=record.fleets + 1,
                           last_deployment_config=config or None)
        return {"EndpointArn": record.arn}

    def update_endpoint_weights_and_capacities(self, body: Body, region: str) -> Body:
        request = parse(UpdateEndpointWeightsAndCapacitiesInput, body)
        record = self._endpoint(request.EndpointName)
        self._check_not_in_progress(record)
        variants = {v.name: v for v in record.variants}
        _check_desired(request)
        unknown = [d.VariantName for d in request.DesiredWeightsAndCapacities if d.VariantName not in variants]
        if unknown:
            raise ValidationError(
                f'The variant(s) "{unknown}" is/are not present in the endpoint "{record.name}"; its variants are '
                f"{sorted(variants)}."
            )
        for desired in request.DesiredWeightsAndCapacities:
            change: dict[str, Any] = {}
            if desired.DesiredInstanceCount is not None:
                change["instance_count"] = desired.DesiredInstanceCount
            if desired.DesiredWeight is not None:
                change["weight"] = desired.DesiredWeight
            variants[desired.VariantName] = variants[desired.VariantName].model_copy(update=change)
        self._check_copy_cap(classic_copies(variants.values()) - classic_copies(record.variants))
        self._put_endpoint(record, status="Updating", variants=tuple(variants.values()))
        return {"EndpointArn": record.arn}

    def _variants(self, config_name: str, region: str) -> tuple[VariantRecord, ...]:
        """The config's variants with a snapshot of each one's model, as the endpoint will keep them."""
        variants = []
        config = self._config(config_name).request
        shadows = {v.VariantName for v in config.ShadowProductionVariants or []}
        for variant in (*config.ProductionVariants, *(config.ShadowProductionVariants or [])):
            container = None
            if variant.ModelName is not None:
                container = self._model(variant.ModelName, region).request.container
            variants.append(VariantRecord(
                name=variant.VariantName, instance_type=variant.InstanceType or "",
                instance_count=variant.InitialInstanceCount or 1, weight=variant.weight, model=variant.ModelName,
                container=container, routing=_routing(variant.RoutingConfig), shadow=variant.VariantName in shadows,
            ))
        return tuple(variants)

    def _check_keeps_components(self, record: EndpointRecord, config: str, variants: tuple[VariantRecord, ...]) -> None:
        """An endpoint's new config must still be able to host the components it has."""
        names = {v.name: v for v in variants}
        for hosted in self.state.components.all():
            if hosted.endpoint.lower() != record.name.lower():
                continue
            variant = names.get(hosted.variant)
            if variant is None or variant.model is not None:
                raise ValidationError(
                    f'Inference component "{hosted.name}" runs on variant "{hosted.variant}", which endpoint config '
                    f'"{config}" does not offer to components: keep that variant without a ModelName, or delete the '
                    "component first."
                )
            self._check_fits_type(variant.instance_type, hosted.name, hosted.specification)

    def _check_not_in_progress(self, record: EndpointRecord) -> None:
        if record.status in IN_PROGRESS:
            raise ValidationError(
                f'Cannot update in-progress endpoint "{record.arn}" ({record.status}): wait until it is InService, '
                "e.g. with boto3's endpoint_in_service waiter."
            )


def _check_desired(request: UpdateEndpointWeightsAndCapacitiesInput) -> None:
    """Each entry must change something, and name its variant once: a second entry for one variant would win
    over the first silently."""
    names = [d.VariantName for d in request.DesiredWeightsAndCapacities]
    idle = [d.VariantName for d in request.DesiredWeightsAndCapacities
            if d.DesiredWeight is None and d.DesiredInstanceCount is None]
    if idle:
        raise ValidationError(f"Give DesiredWeight or DesiredInstanceCount (or both) for variant(s) {idle}: an entry "
                              "with neither changes nothing.")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValidationError(f"Variant(s) {repeated} appear more than once in DesiredWeightsAndCapacities: give one "
                              "entry per variant, with its weight and its instance count.")


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


OPERATIONS = (
    "CreateModel", "DescribeModel", "DeleteModel", "ListModels",
    "CreateEndpointConfig", "DescribeEndpointConfig", "DeleteEndpointConfig", "ListEndpointConfigs",
    "CreateEndpoint", "DescribeEndpoint", "DeleteEndpoint", "ListEndpoints", "UpdateEndpoint",
    "UpdateEndpointWeightsAndCapacities",
    "CreateInferenceComponent", "DescribeInferenceComponent", "DeleteInferenceComponent", "ListInferenceComponents",
    "UpdateInferenceComponent", "UpdateInferenceComponentRuntimeConfig",
    "AddTags", "ListTags", "DeleteTags",
)


def _routing(config: RoutingConfigSpec | None) -> RoutingRecord | None:
    if config is None:
        return None
    prefix_aware = config.PrefixAwareRoutingConfig
    return RoutingRecord(
        strategy=config.RoutingStrategy,
        prefix_length=prefix_aware.PrefixLength if prefix_aware else None,
        concurrency_threshold=prefix_aware.ConcurrencyThreshold if prefix_aware else None,
    )
