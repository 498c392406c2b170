"""The backends `pier up --backend` knows, each declared once: its name, its capabilities, the command-line flags
that fill its options (a pydantic model), and how it opens.

    choice = choose("ray", {"config": Path("ray.yaml"), "address": "auto"})  # validated: ValueError says why
    backend = choice.open(state_dir)  # the ray backend joins its cluster here, before the gateway serves

`pier up` (pier.cli.serve) and `python -m pier.gateway` (pier.gateway.run) build their `--ray-*` options from
`Flag`s. Cheap to import: a backend's own modules (and Ray's, pydantic's) load only when it is chosen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pier.backends.base import Capabilities
from pier.backends.identities import LOCAL_CAPABILITIES, LOCAL_NAME, RAY_CAPABILITIES, RAY_NAME

if TYPE_CHECKING:
    from pydantic import BaseModel

    from pier.backends.base import Backend


@dataclass(frozen=True)
class Flag:
    """A command-line option that sets one of a backend's options."""

    option: str  # e.g. --ray-address
    key: str  # what it sets: a field of the options model, or `config` (the file they are read from)
    type: type  # what the option's value is read as: str, float, Path
    help: str
    in_pier_up: bool = True  # False: only `python -m pier.gateway` takes it

    @property
    def parameter(self) -> str:
        """The option as a Python name (argparse's dest, the typer parameter): --ray-config is ray_config."""
        return self.option.removeprefix("--").replace("-", "_")


@dataclass(frozen=True)
class BackendKind:
    name: str
    capabilities: Capabilities
    flags: tuple[Flag, ...]
    options: Callable[[Mapping[str, Any]], BaseModel | None]  # the flags' values (None: not given), validated
    opener: Callable[[Path, Any], Backend]  # the state folder and the options


@dataclass(frozen=True)
class BackendChoice:
    """A backend and its validated options: what `pier up` runs its copies on."""

    kind: BackendKind
    options: BaseModel | None = None

    def open(self, state_dir: Path) -> Backend:
        return self.kind.opener(state_dir, self.options)


def _no_options(values: Mapping[str, Any]) -> None:
    return None


def _open_local(state_dir: Path, options: None) -> Backend:
    from pier.backends.local import LocalBackend

    return LocalBackend(state_dir)


def _ray_options(values: Mapping[str, Any]) -> BaseModel:
    """The `--ray-config` file's settings with the other `--ray-*` options on top."""
    from pier.backends.ray.config import RayConfig

    given = dict(values)
    return RayConfig.load(given.pop("config", None), **given)


def _open_ray(state_dir: Path, options: Any) -> Backend:
    from pier.backends.ray import RayBackend

    backend = RayBackend(state_dir, options)
    backend.connect()  # joins the cluster; the copies there become its own when this gateway leads (take_over)
    return backend


LOCAL = BackendKind(LOCAL_NAME, LOCAL_CAPABILITIES, (), _no_options, _open_local)
RAY = BackendKind(
    RAY_NAME, RAY_CAPABILITIES,
    (Flag("--ray-address", "address", str, "The Ray cluster for --backend ray: auto, HOST:6379 or ray://HOST:10001 "
          "(default: start a Ray of the gateway's own on this host)."),
     Flag("--ray-config", "config", Path, "YAML for --backend ray: namespace, how instance types map to bundles, "
          "node labels or custom resources (docs/ray.md)."),
     Flag("--ray-namespace", "namespace", str, "The Ray namespace of pier's actors (default pier).",
          in_pier_up=False),
     Flag("--ray-cpus-per-vcpu", "cpus_per_vcpu", float, "Ray CPUs an instance reserves per vCPU of its type "
          "(default 1: a real instance).")),
    _ray_options, _open_ray)
KINDS = {kind.name: kind for kind in (LOCAL, RAY)}
NAMES = tuple(KINDS)
FLAGS = tuple(flag for kind in KINDS.values() for flag in kind.flags)


def choose(name: str, values: Mapping[str, Any] | None = None) -> BackendChoice:
    """The backend called `name` with its options from `values` (flag keys; None: not given). ValueError says
    what is wrong: an unknown name, or options its model refuses."""
    kind = KINDS.get(name)
    if kind is None:
        raise ValueError(f"Unknown backend {name!r}: use one of {', '.join(NAMES)}.")
    own = {flag.key for flag in kind.flags}
    return BackendChoice(kind, kind.options({k: v for k, v in (values or {}).items() if k in own and v is not None}))
