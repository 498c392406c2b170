"""`pier deploy FILE.yaml`: one endpoint described in a few lines, turned into the SageMaker calls it takes.

    endpoint: chat
    instance_type: local            # or any ml.* type pier knows; default local (this host)
    instance_count: 1
    routing:                        # optional: the variant's RoutingConfig (default: least outstanding, prefix-affine)
      strategy: PREFIX_AWARE        # LEAST_OUTSTANDING_REQUESTS, RANDOM, PREFIX_AWARE or KV_AWARE
      prefix_length: 2048           # PREFIX_AWARE only: bytes of body (characters of messages) that make the prefix
      concurrency_threshold: 4      # PREFIX_AWARE only: in flight on a copy before its prefix overflows
    model:                          # a model on every instance (one copy per instance) ...
      data: hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf
      environment: {MAX_TOTAL_TOKENS: 4096}
    components:                     # ... or inference components, each with its copies and resources
      - name: qwen
        model: {data: ./models/qwen.gguf}
        copies: 2
        cpus: 1
        memory_mb: 1024

Models and the endpoint config are named after their content (`<name>-<hash>`), so deploying the same file
again changes nothing and a changed file makes new ones and updates the endpoint to them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError

from pier.control.names import ENDPOINT_NAME, MODEL_NAME, NAME_HINT, NAME_MAX

Name = Annotated[str, StringConstraints(pattern=ENDPOINT_NAME, max_length=NAME_MAX)]
ComponentName = Annotated[str, StringConstraints(pattern=MODEL_NAME, max_length=NAME_MAX - 7)]
VARIANT = "AllTraffic"  # what the SageMaker SDK names a single variant


class DeployFileError(ValueError):
    """The file cannot be deployed; the message names the file, the field and the fix."""


class Block(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelBlock(Block):
    data: Annotated[str, StringConstraints(min_length=1)]  # a local path, file://, s3:// or hf:// URL
    image: str | None = None
    environment: dict[str, str] = Field(default_factory=dict)

    @field_validator("environment", mode="before")
    @classmethod
    def _as_text(cls, value: Any) -> Any:
        """YAML reads MAX_TOTAL_TOKENS: 4096 as a number; an environment holds text."""
        if isinstance(value, dict):
            return {str(k): (json.dumps(v) if isinstance(v, bool) else str(v)) for k, v in value.items()}
        return value

    def container(self, base: Path) -> dict[str, Any]:
        container: dict[str, Any] = {"ModelDataUrl": _resolve(self.data, base), "Environment": self.environment}
        if self.image:
            container["Image"] = self.image
        return container


class ComponentBlock(Block):
    name: ComponentName
    model: ModelBlock
    copies: Annotated[int, Field(ge=0)] = 1
    cpus: Annotated[float, Field(ge=0.25)] | None = None
    memory_mb: Annotated[int, Field(ge=128)] = 1024
    accelerators: Annotated[int, Field(ge=1)] | None = None

    def requirements(self) -> dict[str, Any]:
        wanted: dict[str, Any] = {"MinMemoryRequiredInMb": self.memory_mb}
        if self.cpus is not None:
            wanted["NumberOfCpuCoresRequired"] = self.cpus
        if self.accelerators is not None:
            wanted["NumberOfAcceleratorDevicesRequired"] = self.accelerators
        return wanted


class RoutingBlock(Block):
    strategy: Literal["LEAST_OUTSTANDING_REQUESTS", "RANDOM", "PREFIX_AWARE", "KV_AWARE"]
    prefix_length: int | None = None
    concurrency_threshold: int | None = None

    def config(self) -> dict[str, Any]:
        """The variant's RoutingConfig; the control plane checks what PREFIX_AWARE needs."""
        config: dict[str, Any] = {"RoutingStrategy": self.strategy}
        prefix_aware = {key: value for key, value in (("PrefixLength", self.prefix_length),
                                                      ("ConcurrencyThreshold", self.concurrency_threshold))
                        if value is not None}
        if prefix_aware:
            config["PrefixAwareRoutingConfig"] = prefix_aware
        return config


class DeployFile(Block):
    endpoint: Name
    instance_type: str = "local"
    instance_count: Annotated[int, Field(ge=1)] = 1
    routing: RoutingBlock | None = None
    model: ModelBlock | None = None
    components: list[ComponentBlock] = Field(default_factory=list)
    # SageMaker's DeploymentConfig, as written for UpdateEndpoint (BlueGreenUpdatePolicy, AutoRollbackConfiguration):
    # how a changed file moves the endpoint's traffic to its new config; the control plane checks it
    deployment: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _model_or_components(self) -> DeployFile:
        if (self.model is None) == (not self.components):
            raise ValueError("give either `model` (served on every instance) or `components`, not both or neither")
        names = [c.name for c in self.components]
        if len(set(names)) != len(names):
            raise ValueError(f"component names must be unique; got {names}")
        return self


class Calls(BaseModel):
    """The SageMaker requests a deploy file makes, in the order they are made."""

    models: list[dict[str, Any]]
    config: dict[str, Any]
    endpoint: dict[str, Any]
    components: list[dict[str, Any]]
    deployment: dict[str, Any] | None = None  # UpdateEndpoint's DeploymentConfig, when the endpoint changes


def load(path: Path) -> DeployFile:
    try:
        text = path.read_text()
    except OSError as error:
        raise DeployFileError(f"Cannot read {path}: {error.strerror}.") from None
    return parse(text, str(path))


def parse(text: str, source: str) -> DeployFile:
    """A deploy file's text; `source` names it in messages (its path, or where it came from)."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise DeployFileError(f"{source} is not valid YAML: {error}") from None
    if not isinstance(raw, dict):
        raise DeployFileError(f"{source} must hold a mapping with at least `endpoint` and `model` or `components`.")
    try:
        return DeployFile.model_validate(raw)
    except PydanticValidationError as error:
        raise DeployFileError(f"{source}: " + "; ".join(_problem(p) for p in error.errors(include_url=False))) from None


def calls(file: DeployFile, base: Path) -> Calls:
    """`base` is the folder relative model paths are read from (the deploy file's own)."""
    classic = [_model_call(file.endpoint, file.model, base)] if file.model is not None else []
    hosted = [_model_call(c.name, c.model, base) for c in file.components]
    variant: dict[str, Any] = {"VariantName": VARIANT, "InstanceType": file.instance_type,
                               "InitialInstanceCount": file.instance_count}
    if classic:
        variant["ModelName"] = classic[0]["ModelName"]
    if file.routing is not None:
        variant["RoutingConfig"] = file.routing.config()
    config_name = _named(file.endpoint, variant)
    components = [{
        "InferenceComponentName": c.name, "EndpointName": file.endpoint, "VariantName": VARIANT,
        "Specification": {"ModelName": model["ModelName"], "ComputeResourceRequirements": c.requirements()},
        "RuntimeConfig": {"CopyCount": c.copies},
    } for c, model in zip(file.components, hosted, strict=True)]
    return Calls(
        models=classic + hosted,
        config={"EndpointConfigName": config_name, "ProductionVariants": [variant]},
        endpoint={"EndpointName": file.endpoint, "EndpointConfigName": config_name},
        components=components,
        deployment=file.deployment,
    )


def component_changed(described: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Whether a described inference component differs from the CreateInferenceComponent request `wanted`."""
    spec = described.get("Specification", {})
    return (spec.get("ModelName") != wanted["Specification"]["ModelName"]
            or spec.get("ComputeResourceRequirements") != wanted["Specification"]["ComputeResourceRequirements"]
            or described["RuntimeConfig"]["DesiredCopyCount"] != wanted["RuntimeConfig"]["CopyCount"])


def _model_call(owner: str, block: ModelBlock, base: Path) -> dict[str, Any]:
    container = block.container(base)
    return {"ModelName": _named(owner, container), "PrimaryContainer": container}


def _named(owner: str, content: dict[str, Any]) -> str:
    """`owner-<hash of content>`: the same content gets the same name, so a redeploy finds it exists."""
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:6]
    return f"{owner[: NAME_MAX - 7]}-{digest}"


def _resolve(data: str, base: Path) -> str:
    """Relative paths are relative to the deploy file, not to wherever pier happens to run."""
    if "://" in data:
        return data
    path = Path(data).expanduser()
    return str(path if path.is_absolute() else (base / path).resolve())


NOT_A_DEPLOYMENT = "The deploy file's `deployment` is not a SageMaker DeploymentConfig: "


def deployment_refusal(todo: Calls) -> str | None:
    """Why the file's `deployment` block would be refused, said before anything is made (it is sent only with an
    update: unchecked, a typo would wait for the first changed file, unnoticed); None when it is fine or absent."""
    if todo.deployment is None or not (problems := deployment_problems(todo.deployment)):
        return None
    return NOT_A_DEPLOYMENT + "; ".join(problems)


def update_input(todo: Calls) -> dict[str, Any]:
    """UpdateEndpoint's input for the file: the endpoint's new config, moved as its `deployment` block says."""
    return {**todo.endpoint, **({"DeploymentConfig": todo.deployment} if todo.deployment else {})}


def deployment_problems(config: dict[str, Any]) -> list[str]:
    """What botocore would refuse in UpdateEndpoint's DeploymentConfig (unknown, missing and mistyped fields),
    and the enum values it leaves to the server, each named by its place under `deployment`."""
    import botocore.session
    from botocore.validate import ParamValidator

    request = botocore.session.get_session().get_service_model("sagemaker").shape_for("UpdateEndpointInput")
    report = ParamValidator().validate({"EndpointName": "e", "EndpointConfigName": "c", "DeploymentConfig": config},
                                       request)
    problems = [line.replace("DeploymentConfig", "deployment", 1)
                for line in report.generate_report().splitlines() if line.strip()] if report.has_errors() else []
    return problems + _enum_problems(request.members["DeploymentConfig"], config, "deployment")


def _enum_problems(shape: Any, value: Any, where: str) -> list[str]:
    if shape.type_name == "structure" and isinstance(value, dict):
        return [problem for key, item in value.items() if key in shape.members
                for problem in _enum_problems(shape.members[key], item, f"{where}.{key}")]
    if shape.type_name == "list" and isinstance(value, list):
        return [problem for i, item in enumerate(value)
                for problem in _enum_problems(shape.member, item, f"{where}[{i}]")]
    allowed = getattr(shape, "enum", None)  # only string shapes have one
    if allowed and isinstance(value, str) and value not in allowed:
        return [f"{where}: {value!r} is not one of {', '.join(allowed)}"]
    return []


def _problem(problem: Any) -> str:
    where = ".".join(str(part) for part in problem["loc"]) or "the file"
    message = str(problem["msg"]).removeprefix("Value error, ")
    if problem["type"] == "extra_forbidden":
        message = "is not a field pier knows (check its spelling)"
    elif problem["type"] == "string_pattern_mismatch":  # a regular expression says nothing to a newcomer
        message = f"{message}: {problem['input']!r} is not a name SageMaker accepts. {NAME_HINT}"
    return f"`{where}` {message}"
