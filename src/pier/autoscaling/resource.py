"""What a scalable target scales: an inference component's copy count, or a variant's instance count, named as
Application Auto Scaling names them (`inference-component/IC`, `endpoint/E/variant/V`)."""

from __future__ import annotations

from dataclasses import dataclass

from pier.autoscaling.errors import ScalingValidation

COPY_COUNT = "sagemaker:inference-component:DesiredCopyCount"
INSTANCE_COUNT = "sagemaker:variant:DesiredInstanceCount"
NAMESPACE = "sagemaker"


@dataclass(frozen=True)
class Resource:
    resource_id: str
    component: str | None = None  # an inference component's name
    endpoint: str | None = None  # a variant's endpoint
    variant: str | None = None

    @property
    def dimension(self) -> str:
        return COPY_COUNT if self.component is not None else INSTANCE_COUNT

    @property
    def workload(self) -> str:
        """The name the gateway's copies and queues go by (pier.control.workload)."""
        return self.component if self.component is not None else f"{self.endpoint}/{self.variant}"

    @property
    def dimensions(self) -> dict[str, str]:
        """Its metrics' dimensions in AWS/SageMaker."""
        if self.component is not None:
            return {"InferenceComponentName": self.component}
        return {"EndpointName": str(self.endpoint), "VariantName": str(self.variant)}

    @property
    def noun(self) -> str:
        return "copy" if self.component is not None else "instance"

    @property
    def unit(self) -> str:
        return "copies" if self.component is not None else "instances"


def resource_of(resource_id: str, dimension: str | None = None) -> Resource:
    """The resource a ResourceId names, checked against its ScalableDimension when one is given."""
    parts = resource_id.split("/")
    if len(parts) == 2 and parts[0] == "inference-component" and parts[1]:
        found = Resource(resource_id, component=parts[1])
    elif len(parts) == 4 and parts[0] == "endpoint" and parts[2] == "variant" and parts[1] and parts[3]:
        found = Resource(resource_id, endpoint=parts[1], variant=parts[3])
    else:
        raise ScalingValidation(
            f"Unsupported resource ID {resource_id!r}: pier scales inference-component/NAME "
            f"({COPY_COUNT}) and endpoint/ENDPOINT/variant/VARIANT ({INSTANCE_COUNT}).")
    if dimension is not None and dimension != found.dimension:
        raise ScalingValidation(
            f"Unsupported scalable dimension {dimension!r} for {resource_id}: use {found.dimension}.")
    return found


def check_namespace(namespace: str) -> None:
    if namespace != NAMESPACE:
        raise ScalingValidation(
            f"pier's Application Auto Scaling scales SageMaker resources only: use ServiceNamespace 'sagemaker', "
            f"not {namespace!r}.")
