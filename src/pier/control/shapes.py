"""Request shapes of the SageMaker operations pier serves, validated server-side.

Fields are named exactly as on the wire (PascalCase). Fields pier does not act on are kept (extra="allow")
so Describe* echoes what was sent, as SageMaker does. A request is read into its shape by
`validation_message.parse`, whose refusals read like AWS's own.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, model_validator

from pier import host_path
from pier.control.data_capture import DataCaptureSpec
from pier.control.names import ENDPOINT_NAME, MODEL_NAME, NAME_MAX
from pier.control.shape import Shape

EndpointNameStr = Annotated[str, StringConstraints(pattern=ENDPOINT_NAME, max_length=NAME_MAX)]
ModelNameStr = Annotated[str, StringConstraints(pattern=MODEL_NAME, max_length=NAME_MAX)]
UrlStr = Annotated[str, StringConstraints(min_length=1, max_length=1024)]
EnvMap = dict[Annotated[str, StringConstraints(max_length=1024)], Annotated[str, StringConstraints(max_length=1024)]]


# ---- models


class S3ModelDataSource(Shape):
    S3Uri: UrlStr
    S3DataType: Literal["S3Prefix", "S3Object"] = "S3Prefix"
    CompressionType: Literal["None", "Gzip"] = "None"


class ModelDataSourceSpec(Shape):
    S3DataSource: S3ModelDataSource | None = None


class MultiModelConfigSpec(Shape):
    ModelCacheSetting: Literal["Enabled", "Disabled"] | None = None


class ContainerSpec(Shape):
    Image: str | None = None
    Mode: Literal["SingleModel", "MultiModel"] | None = None
    ModelDataUrl: UrlStr | None = None
    ModelDataSource: ModelDataSourceSpec | None = None
    Environment: EnvMap = Field(default_factory=dict)
    MultiModelConfig: MultiModelConfigSpec | None = None

    @property
    def multi_model(self) -> bool:
        return self.Mode == "MultiModel"

    @model_validator(mode="after")
    def _one_source(self) -> ContainerSpec:
        if self.ModelDataUrl and self.ModelDataSource and self.ModelDataSource.S3DataSource:
            raise ValueError("Give ModelDataUrl or ModelDataSource, not both.")
        return self


class CreateModelInput(Shape):
    ModelName: ModelNameStr
    PrimaryContainer: ContainerSpec | None = None
    Containers: list[ContainerSpec] | None = None

    @model_validator(mode="after")
    def _one_container(self) -> CreateModelInput:
        if self.PrimaryContainer is not None and self.Containers:
            raise ValueError("Give PrimaryContainer or Containers, not both.")
        if self.PrimaryContainer is None and not self.Containers:
            raise ValueError("A model needs a PrimaryContainer with its ModelDataUrl (or Environment.HF_MODEL_ID).")
        if self.Containers and len(self.Containers) > 1:
            raise ValueError(
                "pier serves one container per model, not an inference pipeline: give one PrimaryContainer."
            )
        return self

    @property
    def container(self) -> ContainerSpec:
        container = self.PrimaryContainer or (self.Containers[0] if self.Containers else None)
        assert container is not None
        return container


# ---- endpoint configs and endpoints


RoutingStrategyName = Literal["LEAST_OUTSTANDING_REQUESTS", "RANDOM", "PREFIX_AWARE", "KV_AWARE"]


class PrefixAwareRoutingSpec(Shape):
    PrefixLength: Annotated[int, Field(ge=1024, le=65536)] | None = None
    ConcurrencyThreshold: Annotated[int, Field(ge=1, le=1024)] | None = None


class RoutingConfigSpec(Shape):
    """A variant's ProductionVariantRoutingConfig: how its requests are spread over its copies."""

    RoutingStrategy: RoutingStrategyName
    PrefixAwareRoutingConfig: PrefixAwareRoutingSpec | None = None

    @model_validator(mode="after")
    def _prefix_aware_settings(self) -> RoutingConfigSpec:
        settings = self.PrefixAwareRoutingConfig
        if self.RoutingStrategy != "PREFIX_AWARE":
            if settings is not None:
                raise ValueError(
                    f"PrefixAwareRoutingConfig applies only to RoutingStrategy PREFIX_AWARE, not "
                    f"{self.RoutingStrategy}: remove it, or set RoutingStrategy to PREFIX_AWARE.")
            return self
        if settings is None or settings.PrefixLength is None or settings.ConcurrencyThreshold is None:
            raise ValueError(
                "RoutingStrategy PREFIX_AWARE needs PrefixAwareRoutingConfig with PrefixLength (1024-65536: bytes "
                "of the request body, or characters of an OpenAI request's messages) and ConcurrencyThreshold "
                "(1-1024 requests in flight on a copy before its prefix overflows to another copy).")
        return self


class VariantSpec(Shape):
    VariantName: EndpointNameStr
    ModelName: ModelNameStr | None = None
    InstanceType: str | None = None
    InitialInstanceCount: Annotated[int, Field(ge=1, le=1000)] | None = None
    InitialVariantWeight: Annotated[float, Field(ge=0)] | None = None
    RoutingConfig: RoutingConfigSpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_serverless(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("ServerlessConfig"):
            raise ValueError(
                "pier has no serverless endpoints: remove ServerlessConfig and give InstanceType "
                "(e.g. 'local' or 'ml.c7g.xlarge') and InitialInstanceCount."
            )
        return data

    @model_validator(mode="after")
    def _needs_instances(self) -> VariantSpec:
        if self.InstanceType is None or self.InitialInstanceCount is None:
            raise ValueError(
                f"Variant {self.VariantName!r} needs InstanceType (e.g. 'local' or 'ml.c7g.xlarge') and "
                "InitialInstanceCount."
            )
        return self

    @property
    def weight(self) -> float:
        return 1.0 if self.InitialVariantWeight is None else self.InitialVariantWeight


S3Path = Annotated[str, StringConstraints(max_length=512)]
SnsTopicArn = Annotated[str, StringConstraints(max_length=2048)]
TOPIC = re.compile(r"arn:aws[a-z\-]*:sns:[a-z0-9\-]*:[0-9]{12}:[a-zA-Z0-9_.-]+|https?://\S+")


class AsyncNotificationSpec(Shape):
    """Where SageMaker would publish to SNS. pier has no SNS: a topic is an SNS ARN (the notification is logged, and
    POSTed to PIER_ASYNC_NOTIFICATION_URL when the gateway has one) or, pier's own, an http(s):// URL it POSTs to."""

    SuccessTopic: SnsTopicArn | None = None
    ErrorTopic: SnsTopicArn | None = None
    IncludeInferenceResponseIn: Annotated[
        list[Literal["SUCCESS_NOTIFICATION_TOPIC", "ERROR_NOTIFICATION_TOPIC"]], Field(max_length=2)] | None = None

    @model_validator(mode="after")
    def _topics(self) -> AsyncNotificationSpec:
        for name, topic in (("SuccessTopic", self.SuccessTopic), ("ErrorTopic", self.ErrorTopic)):
            if topic is not None and not TOPIC.fullmatch(topic):
                raise ValueError(f"{name} {topic!r} is neither an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME) nor "
                                 "an http(s):// URL for pier to POST notifications to.")
        return self


class AsyncOutputSpec(Shape):
    S3OutputPath: S3Path | None = None
    S3FailurePath: S3Path | None = None
    KmsKeyId: Annotated[str, StringConstraints(max_length=2048)] | None = None
    NotificationConfig: AsyncNotificationSpec | None = None

    @model_validator(mode="after")
    def _paths(self) -> AsyncOutputSpec:
        if self.S3OutputPath is None:
            raise ValueError("AsyncInferenceConfig.OutputConfig needs S3OutputPath: where answers are written "
                             "(s3://BUCKET/PREFIX, or file:///folder on the gateway's host).")
        for name, path in (("S3OutputPath", self.S3OutputPath), ("S3FailurePath", self.S3FailurePath)):
            if path is not None and not re.fullmatch(r"(s3://[^/]+|file:///[^\s]*)(/.*)?", path):
                raise ValueError(f"{name} {path!r} is not an s3://BUCKET/PREFIX (or file:///folder) path.")
            if path is not None and path.startswith("file:"):
                try:  # refused now: every answer written there would fail, and its failure with it
                    host_path.of_url(path)
                except host_path.PathRefused as error:
                    raise ValueError(f"{name} {error}") from None
        local = [path for path in (self.S3OutputPath, self.S3FailurePath) if path and path.startswith("file:")]
        if self.KmsKeyId and local:  # refused, not ignored: the caller expects encrypted answers
            raise ValueError(f"KmsKeyId encrypts outputs in S3; a file:// path has none ({local[0]}): remove "
                             "KmsKeyId, or write to s3://.")
        return self


class AsyncClientSpec(Shape):
    MaxConcurrentInvocationsPerInstance: Annotated[int, Field(ge=1, le=1000)] | None = None


class AsyncInferenceSpec(Shape):
    """An endpoint config's AsyncInferenceConfig: requests are queued, read from and answered to S3."""

    OutputConfig: AsyncOutputSpec
    ClientConfig: AsyncClientSpec | None = None

    @property
    def max_concurrent(self) -> int | None:
        return self.ClientConfig.MaxConcurrentInvocationsPerInstance if self.ClientConfig else None


class CreateEndpointConfigInput(Shape):
    EndpointConfigName: EndpointNameStr
    ProductionVariants: Annotated[list[VariantSpec], Field(min_length=1, max_length=10)]
    ShadowProductionVariants: Annotated[list[VariantSpec], Field(min_length=1, max_length=10)] | None = None
    DataCaptureConfig: DataCaptureSpec | None = None
    AsyncInferenceConfig: AsyncInferenceSpec | None = None

    @model_validator(mode="after")
    def _async_serves_models(self) -> CreateEndpointConfigInput:
        if self.AsyncInferenceConfig is not None and any(v.ModelName is None for v in self.ProductionVariants):
            raise ValueError("An asynchronous endpoint serves its variants' models: give each variant a ModelName "
                             "(inference components are invoked in real time only), or remove AsyncInferenceConfig.")
        return self

    @model_validator(mode="after")
    def _unique_variants(self) -> CreateEndpointConfigInput:
        names = [v.VariantName for v in self.ProductionVariants]
        if len(set(names)) != len(names):
            raise ValueError(f"Variant names must be unique in an endpoint config; got {names}.")
        with_model = {v.ModelName is not None for v in self.ProductionVariants}
        if len(with_model) > 1:
            raise ValueError(
                "Either every variant names a ModelName (a classic endpoint) or none does (an endpoint for "
                "inference components); this config mixes both."
            )
        return shadow_problem(self)

    def variant(self, name: str) -> VariantSpec | None:
        return next((v for v in self.ProductionVariants if v.VariantName == name), None)


def shadow_problem(config: CreateEndpointConfigInput) -> CreateEndpointConfigInput:
    """AWS's rule for shadow variants (one production variant, one shadow), and pier's: a shadow serves a model."""
    shadows = config.ShadowProductionVariants or []
    if not shadows:
        return config
    if len(config.ProductionVariants) != 1 or len(shadows) != 1:
        raise ValueError("With ShadowProductionVariants, give exactly one variant in ProductionVariants and one in "
                         "ShadowProductionVariants.")
    if any(v.ModelName is None for v in (*config.ProductionVariants, *shadows)):
        raise ValueError("A shadow variant mirrors a variant that serves a model: give ModelName in both "
                         "ProductionVariants and ShadowProductionVariants.")
    if shadows[0].VariantName == config.ProductionVariants[0].VariantName:
        raise ValueError(f"The shadow variant needs a name of its own, not {shadows[0].VariantName!r} again.")
    return config


class CreateEndpointInput(Shape):
    EndpointName: EndpointNameStr
    EndpointConfigName: EndpointNameStr


class UpdateEndpointInput(Shape):
    EndpointName: EndpointNameStr
    EndpointConfigName: EndpointNameStr
    DeploymentConfig: dict[str, Any] | None = None  # checked against botocore's shape by pier.control.request_limits
    RetainDeploymentConfig: bool = False
    RetainAllVariantProperties: bool = False
    ExcludeRetainedVariantProperties: list[dict[str, Any]] = Field(default_factory=list)


class WeightAndCapacity(Shape):
    VariantName: EndpointNameStr
    DesiredWeight: Annotated[float, Field(ge=0)] | None = None
    DesiredInstanceCount: Annotated[int, Field(ge=0, le=1000)] | None = None


class UpdateEndpointWeightsAndCapacitiesInput(Shape):
    EndpointName: EndpointNameStr
    DesiredWeightsAndCapacities: Annotated[list[WeightAndCapacity], Field(min_length=1, max_length=10)]


# ---- inference components


class ResourceRequirements(Shape):
    NumberOfCpuCoresRequired: Annotated[float, Field(ge=0.25)] | None = None
    NumberOfAcceleratorDevicesRequired: Annotated[float, Field(ge=1)] | None = None
    MinMemoryRequiredInMb: Annotated[int, Field(ge=128)]
    MaxMemoryRequiredInMb: Annotated[int, Field(ge=128)] | None = None


class ComponentContainerSpec(Shape):
    Image: str | None = None
    ArtifactUrl: UrlStr | None = None
    Environment: EnvMap = Field(default_factory=dict)


class ComponentSpec(Shape):
    ModelName: ModelNameStr | None = None
    Container: ComponentContainerSpec | None = None
    ComputeResourceRequirements: ResourceRequirements | None = None
    # An adapter component (control/adapters.py): a LoRA adapter served by this base component's copies.
    BaseInferenceComponentName: ModelNameStr | None = None

    @model_validator(mode="after")
    def _needs_model_and_resources(self) -> ComponentSpec:
        if self.BaseInferenceComponentName is not None:
            return self._adapter()
        if self.ModelName is None and (self.Container is None or self.Container.ArtifactUrl is None):
            raise ValueError("Specification needs a ModelName (or Container.ArtifactUrl) to serve.")
        if self.ComputeResourceRequirements is None:
            raise ValueError(
                "Specification needs ComputeResourceRequirements (at least MinMemoryRequiredInMb) so pier "
                "can place the copies."
            )
        return self

    def _adapter(self) -> ComponentSpec:
        if self.Container is None or self.Container.ArtifactUrl is None:
            raise ValueError("An adapter component (BaseInferenceComponentName) needs Container.ArtifactUrl: the "
                             "folder or archive holding its GGUF LoRA adapter.")
        if self.ModelName is not None or self.ComputeResourceRequirements is not None or self.Container.Image:
            raise ValueError("An adapter component runs on its base component's model, image and resources: omit "
                             "ModelName, Container.Image and ComputeResourceRequirements.")
        return self

    @property
    def is_adapter(self) -> bool:
        return self.BaseInferenceComponentName is not None

    @property
    def resources(self) -> ResourceRequirements:
        assert self.ComputeResourceRequirements is not None
        return self.ComputeResourceRequirements


class RuntimeConfigSpec(Shape):
    CopyCount: Annotated[int, Field(ge=0, le=1000)]


class CreateInferenceComponentInput(Shape):
    InferenceComponentName: ModelNameStr
    EndpointName: EndpointNameStr
    VariantName: EndpointNameStr | None = None
    Specification: ComponentSpec
    RuntimeConfig: RuntimeConfigSpec = RuntimeConfigSpec(CopyCount=1)


class UpdateInferenceComponentInput(Shape):
    InferenceComponentName: ModelNameStr
    Specification: ComponentSpec | None = None
    RuntimeConfig: RuntimeConfigSpec | None = None
    DeploymentConfig: dict[str, Any] | None = None  # checked against botocore's shape by pier.control.request_limits


class UpdateInferenceComponentRuntimeConfigInput(Shape):
    InferenceComponentName: ModelNameStr
    DesiredRuntimeConfig: RuntimeConfigSpec


# ---- by name, and listing


class ModelNameInput(Shape):
    ModelName: ModelNameStr


class EndpointConfigNameInput(Shape):
    EndpointConfigName: EndpointNameStr


class EndpointNameInput(Shape):
    EndpointName: EndpointNameStr


class ComponentNameInput(Shape):
    InferenceComponentName: ModelNameStr


class ListInput(Shape):
    SortBy: Literal["Name", "CreationTime", "Status"] = "CreationTime"
    SortOrder: Literal["Ascending", "Descending"] = "Descending"
    NextToken: str | None = None
    MaxResults: Annotated[int, Field(ge=1, le=100)] = 10
    NameContains: str | None = None
    CreationTimeBefore: float | None = None
    CreationTimeAfter: float | None = None
    LastModifiedTimeBefore: float | None = None
    LastModifiedTimeAfter: float | None = None
    StatusEquals: str | None = None
    EndpointNameEquals: str | None = None
    VariantNameEquals: str | None = None
