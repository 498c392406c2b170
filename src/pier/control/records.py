"""What the control plane stores about each resource. An endpoint and an inference component keep a
snapshot of the model they serve, as SageMaker does: deleting a model or an endpoint config later does not
touch the endpoints already made from it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from pier.control.data_capture import DataCaptureSpec
from pier.control.shapes import (
    AsyncInferenceSpec,
    ComponentSpec,
    ContainerSpec,
    CreateEndpointConfigInput,
    CreateModelInput,
)

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


class EndpointRecord(Record):
    config_name: str
    modified: float
    status: EndpointStatus = "Creating"
    failure_reason: str = ""
    variants: tuple[VariantRecord, ...]
    data_capture: DataCaptureSpec | None = None  # the config's DataCaptureConfig when the endpoint took it
    async_inference: AsyncInferenceSpec | None = None  # its config's AsyncInferenceConfig when it was made or updated

    def variant(self, name: str) -> VariantRecord | None:
        return next((v for v in self.variants if v.name == name), None)

    @property
    def hosts_components(self) -> bool:
        """An endpoint whose variants name no model serves inference components."""
        return all(v.model is None for v in self.variants)


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
