"""The inference component operations (Create, Describe, Delete, List, Update, UpdateRuntimeConfig): a component
placed on an endpoint's variant with its copies, or an adapter riding on its base component's copies
(control/adapters.py); a rolling update's start (control/rollout.py)."""

from __future__ import annotations

from typing import Any

from pier.control import adapters, descriptions
from pier.control.capacity import too_big
from pier.control.desired import demand_of
from pier.control.errors import ResourceLimitExceeded, ValidationError, already_exists, not_found
from pier.control.instance_types import lookup
from pier.control.names import arn
from pier.control.records import IN_PROGRESS, ComponentRecord, EndpointRecord, RolloutRecord
from pier.control.resource_store import UnreadableRecord
from pier.control.resources import Body, Resources, check_source
from pier.control.rollout import roll_policy
from pier.control.shapes import (
    ComponentNameInput,
    ComponentSpec,
    ContainerSpec,
    CreateInferenceComponentInput,
    UpdateInferenceComponentInput,
    UpdateInferenceComponentRuntimeConfigInput,
)
from pier.control.tags import tags_of
from pier.control.validation_message import parse
from pier.control.workload import Workload


class ComponentOperations(Resources):
    """The operations on inference components, for ControlPlane (api.py), which serves them with the rest."""

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
            copies=request.RuntimeConfig.CopyCount, tags=tags_of(request),
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
            container=self._component_container(request.Specification, region), copies=0, tags=tags_of(request),
        )
        adapters.scale(record)  # a bad PIER_LORA_SCALE is refused now
        if not self.state.components.insert(record):
            raise already_exists("inference component", record.arn)
        self.wake()
        return {"InferenceComponentArn": record.arn}

    def describe_inference_component(self, body: Body, region: str) -> Body:
        try:
            return descriptions.component(self._component(parse(ComponentNameInput, body).InferenceComponentName),
                                   self.copies)
        except UnreadableRecord as unreadable:
            return descriptions.unreadable_component(unreadable.row, region)

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
        rows = [descriptions.component_row(r) for r in records]
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
            change |= adapters.update_change(record, request.Specification) | {
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
        check_source(base, own.ArtifactUrl if own else None)
        return base

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
