"""What the control plane stores about each resource. An endpoint and an inference component keep a
snapshot of the model they serve, as SageMaker does: deleting a model or an endpoint config later does not
touch the endpoints already made from it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from pier.control.data_capture import DataCaptureSpec
from pier.control.shapes import (
    AsyncInferenceSpec,
    ComponentSpec,
    ContainerSpec,
    CreateEndpointConfigInput,
    CreateModelInput,
)
from pier.control.workload import Workload

EndpointStatus = Literal[
    "OutOfService", "Creating", "Updating", "SystemUpdating", "RollingBack", "InService", "Deleting", "Failed",
    "UpdateRollbackFailed",
]
ComponentStatus = Literal["InService", "Creating", "Updating", "Failed", "Deleting"]
IN_PROGRESS = frozenset({"Creating", "Updating", "Deleting", "SystemUpdating", "RollingBack"})


class Record(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    arn: str
    created: float
    tags: dict[str, str] = {}  # AddTags / ListTags / DeleteTags (pier.control.tags), and Create*'s Tags


class ModelRecord(Record):
    request: CreateModelInput


class ConfigRecord(Record):
    request: CreateEndpointConfigInput


class RoutingRecord(BaseModel):
    """A variant's RoutingConfig as its endpoint keeps it."""

    model_config = ConfigDict(frozen=True)

    strategy: str  # RoutingStrategy: LEAST_OUTSTANDING_REQUESTS, RANDOM, PREFIX_AWARE or KV_AWARE
    prefix_length: int | None = None  # PREFIX_AWARE only
    concurrency_threshold: int | None = None  # PREFIX_AWARE only


class VariantRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    instance_type: str
    instance_count: int  # desired; UpdateEndpointWeightsAndCapacities changes it
    weight: float = 1.0
    model: str | None = None  # a classic variant serves this model on every instance
    container: ContainerSpec | None = None  # the model's container when the endpoint was made
    model_dir: str | None = None  # where its files were fetched to, once they were
    routing: RoutingRecord | None = None  # None: pier's default routing
    shadow: bool = False  # a ShadowProductionVariant: gets a copy of the production variant's requests, answers no one
    fleet: str = ""  # which deployment's copies these are ("": the endpoint's first); see pier.control.deployment

    def workload(self, endpoint: str) -> Workload:
        return Workload.of_variant(endpoint, self.name, self.fleet)


class DeploymentRecord(BaseModel):
    """A blue/green update in progress: the new config's variants (the green fleet) beside the endpoint's own
    (blue), and how far traffic has moved to them (pier.control.deployment decides each step)."""

    model_config = ConfigDict(frozen=True)

    config_name: str
    variants: tuple[VariantRecord, ...]
    config: dict[str, Any] = {}  # the DeploymentConfig it runs by, as given on the wire
    started: float
    step: int = -1  # -1: provisioning the new fleet; k: traffic at the policy's k-th share; past the last: terminating
    since: float  # when the current step began
    data_capture: DataCaptureSpec | None = None  # the new config's DataCaptureConfig, the endpoint's once done
    async_inference: AsyncInferenceSpec | None = None  # the new config's AsyncInferenceConfig, likewise
    was: EndpointStatus = "InService"  # the endpoint's status before, which a rollback returns it to


class EndpointRecord(Record):
    config_name: str
    modified: float
    status: EndpointStatus = "Creating"
    failure_reason: str = ""
    variants: tuple[VariantRecord, ...]
    data_capture: DataCaptureSpec | None = None  # the config's DataCaptureConfig when the endpoint took it
    async_inference: AsyncInferenceSpec | None = None  # its config's AsyncInferenceConfig when it was made or updated
    deployment: DeploymentRecord | None = None  # an UpdateEndpoint in progress
    last_deployment_config: dict[str, Any] | None = None  # the DeploymentConfig of the last UpdateEndpoint
    fleets: int = 0  # fleets made by updates so far: the next one's tag

    def variant(self, name: str) -> VariantRecord | None:
        return next((v for v in self.variants if v.name == name), None)

    @property
    def fleet_variants(self) -> tuple[VariantRecord, ...]:
        """Every variant with copies to run: the endpoint's own and, during an update, the new fleet's."""
        return self.variants + (self.deployment.variants if self.deployment else ())

    @property
    def hosts_components(self) -> bool:
        """An endpoint whose variants name no model serves inference components."""
        return all(v.model is None for v in self.variants)


class RolloutRecord(BaseModel):
    """A rolling UpdateInferenceComponent in progress (DeploymentConfig.RollingUpdatePolicy): the component's copies
    of the lowest `updated` ordinals run its new specification, the rest still the old one kept here; pier.control.
    rollout decides each batch."""

    model_config = ConfigDict(frozen=True)

    specification: ComponentSpec  # the old one, and what it ran
    container: ContainerSpec
    model_dir: str | None
    weights_mb: int | None
    config: dict[str, Any]  # the DeploymentConfig, as given on the wire
    started: float
    since: float  # when the current batch began, or began baking
    updated: int  # copies on the new specification
    baking: bool = False  # the batch is healthy and bakes WaitIntervalInSeconds
    rolling_back: bool = False
    reason: str = ""  # why it rolls back


class ComponentRecord(Record):
    endpoint: str
    variant: str
    modified: float
    status: ComponentStatus = "Creating"
    failure_reason: str = ""
    specification: ComponentSpec
    container: ContainerSpec  # the model's container with the component's own Container merged over it
    copies: int
    model_dir: str | None = None
    weights_mb: int | None = None  # the size of the GGUF files in model_dir, measured when it was fetched
    rollout: RolloutRecord | None = None  # a rolling update in progress
