"""How pier uses a Ray cluster: where it is, how an instance type becomes a placement group bundle, where copies
keep their files on each node. Read from `pier up --ray-config FILE` (YAML) and the `--ray-*` options.

    address: auto                 # none or local: a Ray of pier's own on this host; auto; ray://head:10001; head:6379
    namespace: pier               # pier's actors and placement groups live here (one state per namespace)
    cpus_per_vcpu: 1.0            # Ray CPUs an instance reserves per vCPU of its type
    memory: true                  # reserve the instance type's memory too
    resources: {}                 # added to every instance's bundle, e.g. {pier_instance: 1}
    instance_types:               # per type: the bundle instead of the sizing above, and node labels
      ml.c7g.xlarge:
        resources: {CPU: 4, graviton: 1}
        labels: {pier.io/pool: graviton}
    node_dir: /tmp/pier-ray       # on each node: copies' logs and the models copied there
    model_transfer: auto          # auto: the gateway's model folder when the node sees it, else a copy through
                                  # Ray's object store into the node's cache; always: always copy
    keep_copies: null             # on the gateway's exit: null keeps them on a cluster that is not pier's own
    capacity_wait_s: 60           # how long a copy waits for room before it reports the missing capacity
    join_wait_s: 60               # how long the gateway keeps trying to join a cluster that is not ready yet
    node_ip_address: null         # the gateway's driver attaches to this host's raylet with this node IP address;
                                  # null: Ray's choice (the head's raylet when this host runs the head)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, ValidationError, field_validator, model_validator

DEFAULT_NAMESPACE = "pier"


class ConfigError(ValueError):
    """The Ray configuration cannot be used; the message names the key and what it accepts."""


class TypeMapping(BaseModel):
    """One instance type on this cluster: its bundle (instead of the sizing from its vCPUs and memory) and the
    labels the node holding it must carry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    resources: dict[str, PositiveFloat] | None = None
    labels: dict[str, str] = Field(default_factory=dict)


class RayConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    address: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    cpus_per_vcpu: float = Field(default=1.0, ge=0)
    memory: bool = True
    gpus_per_accelerator: float = Field(default=1.0, ge=0)
    resources: dict[str, PositiveFloat] = Field(default_factory=dict)
    instance_types: dict[str, TypeMapping] = Field(default_factory=dict)
    node_dir: str = "/tmp/pier-ray"
    model_transfer: Literal["auto", "always"] = "auto"
    keep_copies: bool | None = None
    capacity_wait_s: float = Field(default=60.0, ge=0)
    join_wait_s: float = Field(default=60.0, ge=0)
    node_ip_address: str | None = None

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not value or not value.replace("-", "").replace("_", "").isalnum():
            raise ValueError("use letters, digits, '-' and '_'")
        return value

    @model_validator(mode="after")
    def _node_ip_address_needs_a_raylet(self) -> RayConfig:
        # Through Ray Client (ray://) the driver runs on the head, not on this host: there is no raylet to pick.
        if self.node_ip_address is not None and (self.address or "").startswith("ray://"):
            raise ValueError("node_ip_address picks a raylet on the gateway's host, which a ray:// address (Ray "
                             "Client) does not use: give the GCS address (host:6379) instead, or drop "
                             "node_ip_address")
        return self

    @classmethod
    def load(cls, path: Path | None = None, **overrides: Any) -> RayConfig:
        """The file's settings (if any), then `overrides` that are not None (command-line options win)."""
        raw: dict[str, Any] = {}
        if path is not None:
            try:
                loaded = yaml.safe_load(Path(path).read_text()) or {}
            except (OSError, yaml.YAMLError) as error:
                raise ConfigError(f"Cannot read the Ray configuration {path}: {error}") from None
            if not isinstance(loaded, dict):
                raise ConfigError(f"{path} must hold a mapping of settings (address, namespace, cpus_per_vcpu, ...).")
            raw = loaded
        raw |= {key: value for key, value in overrides.items() if value is not None}
        try:
            return cls.model_validate(raw)
        except ValidationError as error:
            problems = "; ".join(_problem(e["loc"], e["msg"]) for e in error.errors())
            where = f" in {path}" if path else ""
            raise ConfigError(f"Bad Ray configuration{where}: {problems}.") from None

    @property
    def own_cluster(self) -> bool:
        """No address (or `local`): pier starts a Ray of its own on this host, which ends with the gateway."""
        return self.address in (None, "local")

    def keeps_copies(self, started_ray: bool) -> bool:
        """Whether copies keep running when the gateway exits, for the next gateway to take over: by default,
        unless the gateway started the Ray they run on (it ends with the gateway)."""
        return self.keep_copies if self.keep_copies is not None else not started_ray


def _problem(loc: tuple[int | str, ...], message: str) -> str:
    if not loc:  # a check across keys: its message names them, without pydantic's "Value error, "
        return message.removeprefix("Value error, ")
    return f"{'.'.join(str(part) for part in loc)}: {message}"
