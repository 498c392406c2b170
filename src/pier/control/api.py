"""The SageMaker control-plane operations pier serves (JSON 1.1, `X-Amz-Target: SageMaker.<Operation>`).

Each operation validates its request, changes the stored state, and wakes the reconciler, which does the
slow part (fetching the model, starting copies) and moves the statuses. Errors carry SageMaker's `__type`
and wording, so boto3 raises the same exceptions and its waiters decide the same way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pier.backends.base import CopyState
from pier.control import adapters, deployment, views
from pier.control.capacity import CopyCap, host_copy_cap, too_big
from pier.control.deployment import deployment_config, retained
from pier.control.desired import demand_of
from pier.control.errors import (
    ResourceInUse,
    ResourceLimitExceeded,
    UnknownOperation,
    ValidationError,
    already_exists,
    not_found,
)
from pier.control.fetch.folders import whole_filesystem
from pier.control.fetch.source import NoModelData, source_of
from pier.control.instance_types import lookup, warn_if_oversize
from pier.control.limits import check_request, load_model
from pier.control.listing import Row, page
from pier.control.names import arn
from pier.control.records import (
    IN_PROGRESS,
    ComponentRecord,
    ConfigRecord,
    DeploymentRecord,
    EndpointRecord,
    ModelRecord,
    RolloutRecord,
    RoutingRecord,
    VariantRecord,
)
from pier.control.rollout import roll_policy
from pier.control.shapes import (
    ComponentNameInput,
    ComponentSpec,
    ContainerSpec,
    CreateEndpointConfigInput,
    CreateEndpointInput,
    CreateInferenceComponentInput,
    CreateModelInput,
    EndpointConfigNameInput,
    EndpointNameInput,
    ListInput,
    ModelNameInput,
    RoutingConfigSpec,
    UpdateEndpointInput,
    UpdateEndpointWeightsAndCapacitiesInput,
    UpdateInferenceComponentInput,
    UpdateInferenceComponentRuntimeConfigInput,
    parse,
)
from pier.control.state import BadRow, State, UnreadableRecord
from pier.control.workload import Workload

log = logging.getLogger("pier.control")

Body = dict[str, Any]


class ControlPlane:
    def __init__(self, state: State, *, copies: views.Copies, wake: Callable[[], None] = lambda: None,
                 clock: Callable[[], float] = time.time, copy_cap: CopyCap | None = None,
                 on_this_host: bool = True) -> None:
        self.state = state
        self.copy_cap = copy_cap or host_copy_cap()
        # An instance bigger than this host only matters when copies run here; on a cluster the backend says
        # which capacity is missing when it places the instance.
        self.on_this_host = on_this_host
        self.copies = copies
        self.wake = wake
        self.clock = clock
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
        _check_source(request.container)
        record = ModelRecord(name=request.ModelName, arn=arn("model", request.ModelName, region),
                             created=self.clock(), request=request)
        if not self.state.models.insert(record):
            raise already_exists("model", record.arn)
        return {"ModelArn": record.arn}

    def describe_model(self, body: Body, region: str) -> Body:
        return views.model(self._model(parse(ModelNameInput, body).ModelName, region))

    def delete_model(self, body: Body, region: str) -> Body:
        name = parse(ModelNameInput, body).ModelName
        if not self.state.models.delete(name):
            raise not_found("model", arn("model", name, region))
        return {}

    def list_models(self, body: Body, region: str) -> Body:
        records, unreadable = self.state.models.scan()
        return self._list(body, "Models", [views.model_row(r) for r in records], unreadable, region)

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
                              arn=arn("endpoint configuration", request.EndpointConfigName, region))
        if not self.state.configs.insert(record):
            raise already_exists("endpoint configuration", record.arn)
        return {"EndpointConfigArn": record.arn}

    def describe_endpoint_config(self, body: Body, region: str) -> Body:
        return views.config(self._config(parse(EndpointConfigNameInput, body).EndpointConfigName))

    def delete_endpoint_config(self, body: Body, region: str) -> Body:
        name = parse(EndpointConfigNameInput, body).EndpointConfigName
        if not self.state.configs.delete(name):
            raise not_found("endpoint configuration", name)
        return {}

    def list_endpoint_configs(self, body: Body, region: str) -> Body:
        records, unreadable = self.state.configs.scan()
        return self._list(body, "EndpointConfigs", [views.config_row(r) for r in records], unreadable, region)

    # ---- endpoints

    def create_endpoint(self, body: Body, region: str) -> Body:
        request = parse(CreateEndpointInput, body)
        now = self.clock()
        record = EndpointRecord(
            name=request.EndpointName, arn=arn("endpoint", request.EndpointName, region), created=now, modified=now,
            config_name=request.EndpointConfigName, variants=self._variants(request.EndpointConfigName, region),
            data_capture=self._config(request.EndpointConfigName).request.DataCaptureConfig,
            async_inference=self._config(request.EndpointConfigName).request.AsyncInferenceConfig,
        )
        self._check_copy_cap(_classic_copies(record.variants))
        if not self.state.endpoints.insert(record):
            raise already_exists("endpoint", record.arn)
        self.wake()
        return {"EndpointArn": record.arn}

    def describe_endpoint(self, body: Body, region: str) -> Body:
        try:
            return views.endpoint(self._endpoint(parse(EndpointNameInput, body).EndpointName), self.copies)
        except UnreadableRecord as unreadable:
            return views.unreadable_endpoint(unreadable.row, region)

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
        return self._list(body, "Endpoints", [views.endpoint_row(r) for r in records], unreadable, region)

    def update_endpoint(self, body: Body, region: str) -> Body:
        request = parse(UpdateEndpointInput, body)
        record = self._endpoint(request.EndpointName)
        self._check_not_in_progress(record)
        variants = self._variants(request.EndpointConfigName, region)
        self._check_keeps_components(record, request.EndpointConfigName, variants)
        variants = retained(record.variants, variants, request)
        capture = self._config(request.EndpointConfigName).request.DataCaptureConfig
        asynchronous = self._config(request.EndpointConfigName).request.AsyncInferenceConfig
        if not _classic_copies(variants):  # no copies of its own to swap: the config applies at once
            self._check_copy_cap(-_classic_copies(record.variants))
            self._put_endpoint(record, status="Updating", config_name=request.EndpointConfigName, variants=variants,
                               data_capture=capture, async_inference=asynchronous)
            return {"EndpointArn": record.arn}
        config = deployment_config(record, request)
        problem = deployment.check(config, _classic_copies(variants))
        if problem:
            raise ValidationError(problem)
        try:  # the new fleet runs beside the old one until traffic has moved to it
            self._check_copy_cap(_classic_copies(variants))
        except ResourceLimitExceeded as error:
            raise ResourceLimitExceeded(
                f"UpdateEndpoint starts the new config's {_classic_copies(variants)} copies beside the "
                f"{_classic_copies(record.variants)} now serving, and this host cannot hold both: {error.message}"
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
        self._check_copy_cap(_classic_copies(variants.values()) - _classic_copies(record.variants))
        self._put_endpoint(record, status="Updating", variants=tuple(variants.values()))
        return {"EndpointArn": record.arn}

    # ---- inference components

    def create_inference_component(self, body: Body, region: str) -> Body:
        request = parse(CreateInferenceComponentInput, body)
        endpoint = self._endpoint(request.EndpointName)
        if endpoint.status == "Deleting":
            raise not_found("endpoint", request.EndpointName)
        if request.Specification.is_adapter:
            return self._create_adapter(request, endpoint, region)
        variant = self._component_variant(endpoint, request.VariantName)
        self._check_fits(endpoint, variant, request.InferenceComponentName, request.Specification)
        self._check_copy_cap(request.RuntimeConfig.CopyCount)
        now = self.clock()
        record = ComponentRecord(
            name=request.InferenceComponentName, created=now, modified=now,
            arn=arn("inference component", request.InferenceComponentName, region),
            endpoint=endpoint.name, variant=variant, specification=request.Specification,
            container=self._component_container(request.Specification, region),
            copies=request.RuntimeConfig.CopyCount,
        )
        if not self.state.components.insert(record):
            raise already_exists("inference component", record.arn)
        self.wake()
        return {"InferenceComponentArn": record.arn}

    def _create_adapter(self, request: CreateInferenceComponentInput, endpoint: EndpointRecord, region: str) -> Body:
        """An adapter component: on its base's variant, with no copies of its own (control/adapters.py)."""
        base_name = request.Specification.BaseInferenceComponentName or ""
        base = adapters.check_base(self.state.components.get(base_name), base_name, endpoint.name)
        if "RuntimeConfig" in request.model_fields_set:
            raise ValidationError("An adapter component runs on its base component's copies: omit RuntimeConfig "
                                  f'(scale "{base.name}" instead).')
        if request.VariantName is not None and request.VariantName != base.variant:
            raise ValidationError(f'Base inference component "{base.name}" runs on variant "{base.variant}": omit '
                                  "VariantName or give that one.")
        now = self.clock()
        record = ComponentRecord(
            name=request.InferenceComponentName, created=now, modified=now,
            arn=arn("inference component", request.InferenceComponentName, region),
            endpoint=endpoint.name, variant=base.variant, specification=request.Specification,
            container=self._component_container(request.Specification, region), copies=0,
        )
        adapters.scale(record)  # a bad PIER_LORA_SCALE is refused now
        if not self.state.components.insert(record):
            raise already_exists("inference component", record.arn)
        self.wake()
        return {"InferenceComponentArn": record.arn}

    def describe_inference_component(self, body: Body, region: str) -> Body:
        try:
            return views.component(self._component(parse(ComponentNameInput, body).InferenceComponentName),
                                   self.copies)
        except UnreadableRecord as unreadable:
            return views.unreadable_component(unreadable.row, region)

    def delete_inference_component(self, body: Body, region: str) -> Body:
        try:
            record = self._component(parse(ComponentNameInput, body).InferenceComponentName)
        except UnreadableRecord as unreadable:
            self._forget("inference component", self.state.components.delete, unreadable.row.name)
            return {}
        remaining = adapters.adapters_of(record.name, self.state.components.all())
        if remaining:
            raise ValidationError(
                f'Inference component "{record.name}" is the base of adapter inference components '
                f'({", ".join(a.name for a in remaining)}): delete them with DeleteInferenceComponent and wait until '
                "they are gone, then delete the base.")
        self._put_component(record, status="Deleting")
        return {}

    def list_inference_components(self, body: Body, region: str) -> Body:
        records, unreadable = self.state.components.scan()
        rows = [views.component_row(r) for r in records]
        return self._list(body, "InferenceComponents", rows, unreadable, region)

    def update_inference_component(self, body: Body, region: str) -> Body:
        request = parse(UpdateInferenceComponentInput, body)
        record = self._component(request.InferenceComponentName)
        if record.status in IN_PROGRESS:
            raise ValidationError(
                f'Cannot update in-progress inference component "{record.arn}" ({record.status}): wait until it is '
                "InService or Failed."
            )
        change: dict[str, Any] = {"status": "Updating"}
        if adapters.is_adapter(record) or (request.Specification is not None and request.Specification.is_adapter):
            self._check_adapter_update(record, request)
            if request.DeploymentConfig is not None:
                raise ValidationError(f'Inference component "{record.name}" is an adapter, with no copies of its own '
                                      "to roll: omit DeploymentConfig.")
        elif request.Specification is not None:
            endpoint = self._endpoint(record.endpoint)
            self._check_fits(endpoint, record.variant, record.name, request.Specification)
            change |= {"specification": request.Specification, "model_dir": None, "weights_mb": None,
                       "container": self._component_container(request.Specification, region)}
        copies = record.copies if request.RuntimeConfig is None else request.RuntimeConfig.CopyCount
        if request.DeploymentConfig is not None and request.Specification is not None:
            change["rollout"] = self._rollout(record, request.DeploymentConfig, copies)
        elif request.DeploymentConfig is not None:
            raise ValidationError("DeploymentConfig rolls out a new Specification: give the Specification to roll out "
                                  "(a copy count alone changes with RuntimeConfig, no rollout needed).")
        if request.RuntimeConfig is not None:
            self._check_copy_cap(request.RuntimeConfig.CopyCount - record.copies)
            change["copies"] = request.RuntimeConfig.CopyCount
        if adapters.is_adapter(record) and request.Specification is not None:
            change |= {"specification": request.Specification, "model_dir": None, "weights_mb": None,
                       "container": self._component_container(request.Specification, region)}
        self._put_component(record, **change)
        return {"InferenceComponentArn": record.arn}

    def update_inference_component_runtime_config(self, body: Body, region: str) -> Body:
        request = parse(UpdateInferenceComponentRuntimeConfigInput, body)
        record = self._component(request.InferenceComponentName)
        if record.status == "Deleting":
            raise ValidationError(f'Inference component "{record.name}" is being deleted; it cannot be scaled.')
        if adapters.is_adapter(record):
            raise ValidationError(f'Inference component "{record.name}" is an adapter: it runs on the copies of '
                                  f'"{adapters.base_name(record)}"; scale that one.')
        # Scaling a component that is still being created keeps it Creating; otherwise it updates.
        status = "Creating" if record.status == "Creating" else "Updating"
        self._check_copy_cap(request.DesiredRuntimeConfig.CopyCount - record.copies)
        self._put_component(record, status=status, copies=request.DesiredRuntimeConfig.CopyCount)
        return {"InferenceComponentArn": record.arn}

    def _check_adapter_update(self, record: ComponentRecord, request: UpdateInferenceComponentInput) -> None:
        """An adapter may get another artifact; it stays an adapter of the same base, with no copies."""
        spec = request.Specification
        if request.RuntimeConfig is not None:
            raise ValidationError(f'Inference component "{record.name}" is an adapter: omit RuntimeConfig (it runs '
                                  "on its base's copies).")
        if spec is None:
            return
        if not adapters.is_adapter(record) or spec.BaseInferenceComponentName is None or (
                spec.BaseInferenceComponentName.lower() != adapters.base_name(record).lower()):
            raise ValidationError(f'Inference component "{record.name}" cannot change between a base and an adapter, '
                                  "nor change its base: create a new component instead.")

    def _rollout(self, record: ComponentRecord, config: Body, copies: int) -> RolloutRecord:
        """A rolling update's start: its first batch's new copies run beside the old ones they replace, so the
        host must hold that many more copies now."""
        policy = roll_policy(config, copies)
        try:
            self._check_copy_cap(policy.batch + max(0, copies - record.copies))
        except ResourceLimitExceeded as error:
            raise ResourceLimitExceeded(
                f"A rolling update starts each batch's {policy.batch} new copies beside the old ones, and this host "
                f"cannot hold them: {error.message} Lower MaximumBatchSize, or free room first."
            ) from None
        now = self.clock()
        return RolloutRecord(specification=record.specification, container=record.container,
                             model_dir=record.model_dir, weights_mb=record.weights_mb, config=config, started=now,
                             since=now, updated=policy.batch)

    # ---- helpers

    def _model(self, name: str, region: str) -> ModelRecord:
        record = self.state.models.get(name)
        if record is None:
            raise not_found("model", arn("model", name, region))
        return record

    def _config(self, name: str) -> ConfigRecord:
        record = self.state.configs.get(name)
        if record is None:
            raise not_found("endpoint configuration", name)
        return record

    def _endpoint(self, name: str) -> EndpointRecord:
        record = self.state.endpoints.get(name)
        if record is None:
            raise not_found("endpoint", name)
        return record

    def _component(self, name: str) -> ComponentRecord:
        record = self.state.components.get(name)
        if record is None:
            raise not_found("inference component", name)
        return record

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

    def _component_variant(self, endpoint: EndpointRecord, wanted: str | None) -> str:
        if not endpoint.hosts_components:
            raise ValidationError(
                f'Endpoint "{endpoint.name}" serves a model directly (its endpoint config names a ModelName): '
                "inference components need an endpoint whose config names no ModelName in its variants."
            )
        names = [v.name for v in endpoint.variants]
        if wanted is None:
            if len(names) > 1:
                raise ValidationError(f'Endpoint "{endpoint.name}" has variants {names}: give VariantName.')
            return names[0]
        if wanted not in names:
            raise ValidationError(f'Endpoint "{endpoint.name}" has no variant "{wanted}"; its variants: {names}.')
        return wanted

    def _component_container(self, spec: ComponentSpec, region: str) -> ContainerSpec:
        """The model's container with the component's own Image and Environment over it."""
        base = self._model(spec.ModelName, region).request.container if spec.ModelName else ContainerSpec()
        own = spec.Container
        if own is not None:
            base = base.model_copy(update={
                "Image": own.Image or base.Image, "Environment": {**base.Environment, **own.Environment},
            })
        _check_source(base, own.ArtifactUrl if own else None)
        return base

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

    def _check_fits(self, endpoint: EndpointRecord, variant: str, name: str, spec: ComponentSpec) -> None:
        found = endpoint.variant(variant)
        assert found is not None  # checked by the caller
        self._check_fits_type(found.instance_type, name, spec)

    @staticmethod
    def _check_fits_type(instance_type: str, name: str, spec: ComponentSpec) -> None:
        """A copy bigger than a whole instance could never be placed: refused now, not Failed later."""
        reason = too_big(lookup(instance_type), demand_of(Workload.of_component(name), spec.resources, 1))
        if reason:
            raise ResourceLimitExceeded(reason)

    def _check_copy_cap(self, delta: int) -> None:
        """More copies than this host holds are refused now, when the request asks for them. Only copies that run
        or are starting count: a copy the backend gave up on (no process) holds none of the cap."""
        wanted = 0
        for c in self.state.components.all():
            if c.status != "Deleting":
                wanted += self._holding([Workload.of_component(c.name)], c.copies, c.status)
        for e in self.state.endpoints.all():
            if e.status != "Deleting":
                variants = e.fleet_variants
                workloads = [v.workload(e.name) for v in variants if v.model is not None]
                wanted += self._holding(workloads, _classic_copies(variants), e.status)
        reason = self.copy_cap.refusal(wanted, delta)
        if reason:
            raise ResourceLimitExceeded(reason)

    def _holding(self, workloads: list[Workload], wanted: int, status: str) -> int:
        """How many of the cap's copies a resource holds: a Failed one, those of its copies that still run or are
        starting (a failed fetch or start left none); any other, the copies it wants but for those that failed."""
        states = [c.state for w in workloads for c in self.copies(w)]
        if status == "Failed":
            return sum(1 for state in states if state not in (CopyState.FAILED, CopyState.STOPPED))
        return max(0, wanted - states.count(CopyState.FAILED))

    def _check_not_in_progress(self, record: EndpointRecord) -> None:
        if record.status in IN_PROGRESS:
            raise ValidationError(
                f'Cannot update in-progress endpoint "{record.arn}" ({record.status}): wait until it is InService, '
                "e.g. with boto3's endpoint_in_service waiter."
            )

    def _put_endpoint(self, record: EndpointRecord, **change: Any) -> None:
        self.state.endpoints.put(record.model_copy(update={**change, "modified": self.clock(), "failure_reason": ""}))
        self.wake()

    def _put_component(self, record: ComponentRecord, **change: Any) -> None:
        self.state.components.put(record.model_copy(update={**change, "modified": self.clock(), "failure_reason": ""}))
        self.wake()

    def _forget(self, kind: str, delete: Callable[[str], bool], name: str) -> None:
        delete(name)
        log.warning("%s %s deleted with its unreadable record", kind, name)
        self.wake()

    def _list(self, body: Body, key: str, rows: list[Row], unreadable: list[BadRow], region: str) -> Body:
        rows = rows + [views.unreadable_row(row, region) for row in unreadable]
        items, token = page(rows, parse(ListInput, body))
        return {key: items, **({"NextToken": token} if token else {})}


def _classic_copies(variants: Iterable[VariantRecord]) -> int:
    """A classic variant runs one copy per instance."""
    return sum(v.instance_count for v in variants if v.model is not None)


def _check_source(container: ContainerSpec, artifact_url: str | None = None) -> None:
    try:
        source = source_of(container, artifact_url)
    except NoModelData as error:
        raise ValidationError(str(error)) from None
    if source.scheme == "file":
        reason = whole_filesystem(Path(source.local_path))
        if reason:
            raise ValidationError(f"{reason}, not a model folder: give the folder that holds the model's files.")


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


OPERATIONS = (
    "CreateModel", "DescribeModel", "DeleteModel", "ListModels",
    "CreateEndpointConfig", "DescribeEndpointConfig", "DeleteEndpointConfig", "ListEndpointConfigs",
    "CreateEndpoint", "DescribeEndpoint", "DeleteEndpoint", "ListEndpoints", "UpdateEndpoint",
    "UpdateEndpointWeightsAndCapacities",
    "CreateInferenceComponent", "DescribeInferenceComponent", "DeleteInferenceComponent", "ListInferenceComponents",
    "UpdateInferenceComponent", "UpdateInferenceComponentRuntimeConfig",
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
