"""The layering is a contract: every import in src/pier, read with `ast`, follows the drawing below, and the
packages import each other without a cycle; nor do its modules (files), lazy imports included; and no module is longer
than the house's 450 lines.

A node is a package of pier (`control`, `gateway`, ...) or one of its top-level modules (`errors`, `storage`, ...;
`pier` is `pier/__init__.py`, the version). An entry of what a node may import is another node, or a module of one
(`runtime.observer`) when only that module may be imported. Every import counts: at module level, inside a
function, and under `if TYPE_CHECKING:`, since a type named from another layer is as much a dependency of whoever
reads (and type-checks) the code as a call is, and a cycle through annotations is still a cycle in its meaning.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PIER = SRC / "pier"


def _(*targets: str) -> frozenset[str]:
    return frozenset(targets)


# Who may import whom (docs/architecture.md, "Layers and who may import whom"). Lower layers first.
MAY_IMPORT: dict[str, frozenset[str]] = {
    # The bottom: shared by several processes, importing nothing of pier (or only errors).
    "pier": _(),  # pier/__init__.py: the version
    "errors": _(),  # the one error tree and its wire fields
    "channel": _("env"),  # the gateway <-> copy contract: X-Pier-* headers, frames, copy secret, concurrency
    # (channel.headers, the X-Pier-* table, imports nothing: the modules below may name its headers)
    "dialect": _(),  # which API a path speaks: the one decision of error shapes
    "deadline": _(),
    "host_path": _(),  # the one place a file:// URL, or a name under a folder, becomes a local path
    "multi_model": _("host_path", "channel.headers"),  # what a multi-model copy and the gateway tell each other
    "served_name": _("channel.headers"),
    "ports": _(),  # can a process listen where it was told to (asked before it starts anything)
    "lora_file": _(),  # a LoRA GGUF read without llama.cpp: the control plane's check and the engine's
    "storage": _("env", "host_path"),  # users' objects (s3://, file://) and the one S3 client
    "synthetic": _(),
    "console": _(),
    "capture": _("env", "host_path"),
    "env": _("errors"),  # the one reader of settings from a process's environment
    "variables": _(),  # the table of every PIER_* setting, written into docs/settings.md
    "error_bodies": _("errors", "dialect"),  # one renderer per dialect: every error body pier writes
    "state_folder": _("errors"),  # the state folder's files: opened, checked, copied; the stores build on it
    # The model server's process.
    "engine": _("errors", "lora_file"),
    # gpus reaches engine.devices lazily, only on a host with real GPUs: can its llama.cpp use them
    "gpus": _("env", "errors", "engine.devices"),
    "model": _("errors", "engine"),  # chat templates and tool formats, on the engine's ModelInfo and grammars
    "server": _("env", "pier", "errors", "error_bodies", "deadline", "channel", "multi_model", "dialect",
                "served_name", "ports", "engine", "model",
                # the copy's guard reads a bearer token and compares secrets as the gateway's guard does
                "security.bearer", "security.credentials"),
    # The gateway's process: the gateway joins the rest; control and runtime never import each other.
    "backends": _("pier", "errors", "channel"),
    "runtime": _("env", "errors", "error_bodies", "deadline", "channel", "multi_model", "dialect", "served_name",
                 "state_folder", "backends"),
    "autoscaling": _("env", "errors", "error_bodies", "dialect", "multi_model", "state_folder", "runtime.observer"),
    "control": _("env", "errors", "channel.headers", "gpus", "host_path", "lora_file", "multi_model", "state_folder",
                 "storage", "backends"),
    # transform's records go through the runtime's one attempt loop (its package only), as every request does
    "transform": _("pier", "host_path", "storage", "channel", "state_folder", "backends", "control",
                   "runtime.attempts"),
    # asynchronous inference, as batch transform, is a package of its own that the gateway wires in: its queue, its
    # requests checked, their runs through the runtime's forwarding (under their own timeout) and notifications
    "async_inference": _("storage", "channel", "state_folder", "backends", "control", "runtime", "autoscaling"),
    "security": _("env", "errors", "error_bodies", "dialect"),
    "gateway": _("env", "pier", "errors", "error_bodies", "dialect", "channel", "gpus", "lora_file", "ports", "storage",
                 "state_folder", "capture",
                 "engine.kernels",  # the host's CPU and llama.cpp build, logged at start (llama.cpp imported lazily)
                 "console", "backends", "runtime", "autoscaling", "control", "transform", "async_inference", "security",
                 "client.deploy_file"),
    # Clients and tools.
    "client": _("control.names", "control.records", "security"),
    "bench": _("env", "pier", "errors", "gpus", "synthetic", "security.client_trust",
               "engine.kernels"),  # which CPU kernels made the figures
    "tune": _("bench", "client", "control.instance_types", "engine.kv_type", "server.kv_budget"),
    "cli": _("backends", "bench", "client", "control", "engine.kv_type", "gateway", "gpus", "host_path", "ports",
             "security", "server.container", "state_folder", "synthetic", "tune"),
    "__main__": _("cli"),
}

# Modules (files) longer than MAX_LINES today, each with its length when listed: the list only shrinks. Issue 38
# ("fences that hold") names them; each leaves the list when it is split.
MAX_LINES = 450
TOO_LONG: dict[str, int] = {}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, dotted
    target: str  # the imported module (or package), dotted
    where: str  # path:line
    line: str  # the import statement's first line, as written

    @property
    def edge(self) -> tuple[str, str]:
        return node_of(self.source), node_of(self.target)

    def __str__(self) -> str:
        return f"{self.where}: {self.line}"


def node_of(module: str) -> str:
    """The node a dotted module of pier belongs to: its package, or the top-level module itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "pier"


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(module: str, src: Path) -> bool:
    path = src.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports_of(text: str, module: str, *, package: bool, src: Path, where: str = "") -> Iterator[Import]:
    """Every import of pier in one module's source, wherever it stands (module level, functions, TYPE_CHECKING)."""
    lines = text.splitlines()
    for node in ast.walk(ast.parse(text)):
        for target in _targets(node, module, package=package, src=src):
            if target == "pier" or target.startswith("pier."):
                yield Import(module, target, f"{where}:{node.lineno}", lines[node.lineno - 1].strip())


def _targets(node: ast.AST, module: str, *, package: bool, src: Path) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        here = module.split(".") if package else module.split(".")[:-1]
        base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
    # `from pier import storage` imports the module pier.storage; `from pier import __version__`, pier itself.
    return [f"{base}.{a.name}" if is_module(f"{base}.{a.name}", src) else base for a in node.names]


def all_imports(src: Path = SRC) -> list[Import]:
    found = []
    for path in sorted((src / "pier").rglob("*.py")):
        found += imports_of(path.read_text(), module_name(path, src), package=path.name == "__init__.py", src=src,
                            where=str(path.relative_to(src.parent)))
    return found


def nodes(src: Path = SRC) -> set[str]:
    """Every package and top-level module of pier."""
    root = src / "pier"
    modules = {p.stem for p in root.glob("*.py") if p.name != "__init__.py"}
    packages = {p.parent.name for p in root.glob("*/__init__.py")}
    return modules | packages | {"pier"}


def allowed(item: Import) -> bool:
    source, target = item.edge
    if source == target:
        return True
    rel = item.target.removeprefix("pier.")
    return any(rel == entry or rel.startswith(entry + ".") for entry in MAY_IMPORT.get(source, ()))


def cycle(edges: dict[str, set[str]]) -> list[str]:
    """One cycle of the graph, as its nodes with the first repeated at the end; [] when there is none."""
    state: dict[str, str] = {}  # node -> "open" while on the path, "done" after
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = "done"
        return []

    for start in sorted(edges):
        if start not in state and (found := visit(start)):
            return found
    return []


def drawing() -> str:
    """The contract, for whoever reads a failure."""
    rows = [f"  {node:>13} ──► {', '.join(sorted(targets)) or '(nothing of pier)'}"
            for node, targets in MAY_IMPORT.items()]
    return "Who may import whom (MAY_IMPORT in tests/test_layers.py):\n" + "\n".join(rows)


# ---- the contract itself


def test_the_drawing_names_every_package_and_top_level_module() -> None:
    missing = sorted(nodes() - set(MAY_IMPORT))
    gone = sorted(set(MAY_IMPORT) - nodes())
    assert not missing, f"Add {missing} to MAY_IMPORT in tests/test_layers.py, with what each may import.\n{drawing()}"
    assert not gone, f"{gone} no longer exist in src/pier: take them out of MAY_IMPORT.\n{drawing()}"


def test_each_entry_of_the_drawing_names_a_module_that_exists() -> None:
    unknown = sorted(f"{node} ──► {entry}" for node, targets in MAY_IMPORT.items() for entry in targets
                     if not is_module(f"pier.{entry}" if entry != "pier" else "pier", SRC))
    assert not unknown, f"These entries name no module of pier (moved or renamed?): {unknown}\n{drawing()}"


def test_the_drawing_has_no_cycle() -> None:
    edges = {node: {entry.split(".")[0] for entry in targets} for node, targets in MAY_IMPORT.items()}
    found = cycle(edges)
    assert not found, f"MAY_IMPORT allows a cycle: {' ──► '.join(found)}\n{drawing()}"


# ---- the code against it


def test_every_import_follows_the_drawing() -> None:
    offending = [item for item in all_imports() if not allowed(item)]
    listed = "\n".join(f"  {item.edge[0]} may not import {item.target}: {item}" for item in offending)
    assert not offending, (f"{len(offending)} import(s) outside the layer drawing:\n{listed}\nMove the code to the "
                           f"layer it belongs to, or, if the drawing is wrong, change MAY_IMPORT (and "
                           f"docs/architecture.md) on purpose.\n{drawing()}")


def test_no_package_cycle() -> None:
    edges: dict[str, set[str]] = {}
    examples: dict[tuple[str, str], Import] = {}
    for item in all_imports():
        source, target = item.edge
        if source != target:
            edges.setdefault(source, set()).add(target)
            examples.setdefault(item.edge, item)
    found = cycle(edges)
    steps = "\n".join(f"  {a} ──► {b}: {examples[(a, b)]}" for a, b in itertools.pairwise(found))
    assert not found, f"The packages import each other in a cycle:\n{steps}\n{drawing()}"


def test_no_module_cycle() -> None:
    """Files import each other without a cycle, lazy (in-function) and TYPE_CHECKING imports included: a lazy
    import hides a cycle from Python's loader, not from whoever reads or changes the two files."""
    edges: dict[str, set[str]] = {}
    examples: dict[tuple[str, str], Import] = {}
    for item in all_imports():
        if item.source != item.target:
            edges.setdefault(item.source, set()).add(item.target)
            examples.setdefault((item.source, item.target), item)
    found = cycle(edges)
    steps = "\n".join(f"  {a} ──► {b}: {examples[(a, b)]}" for a, b in itertools.pairwise(found))
    assert not found, (f"These modules import each other in a cycle:\n{steps}\nMove what both need into a module "
                       "of its own that imports neither, or pass it in.")


def lengths(src: Path = SRC) -> dict[str, int]:
    return {str(path.relative_to(src)): len(path.read_text().splitlines()) for path in sorted(src.rglob("*.py"))}


def test_no_module_is_longer_than_the_house_allows() -> None:
    over = {name: size for name, size in lengths().items() if size > MAX_LINES}
    new = {name: size for name, size in over.items() if name not in TOO_LONG}
    grown = {name: size for name, size in over.items() if name in TOO_LONG and size > TOO_LONG[name]}
    gone = sorted(name for name in TOO_LONG if over.get(name) is None)
    assert not new, (f"{new} are over {MAX_LINES} lines: split each into modules of one concept "
                     "(house rules), rather than listing it in TOO_LONG.")
    assert not grown, f"{grown} grew past their length in TOO_LONG ({TOO_LONG}): split them instead."
    assert not gone, f"{gone} are within {MAX_LINES} lines now (or gone): take them out of TOO_LONG."


# ---- the reader of imports


@pytest.mark.parametrize(("text", "module", "package", "targets"), [
    ("import pier.control.resource_store", "pier.gateway.app", False, ["pier.control.resource_store"]),
    ("from pier.control.resource_store import ResourceStore", "pier.gateway.app", False,
     ["pier.control.resource_store"]),
    ("from pier.control import resource_store", "pier.gateway.app", False, ["pier.control.resource_store"]),
    ("from pier import storage, __version__", "pier.gateway.app", False, ["pier.storage", "pier"]),
    ("from . import request_limits", "pier.control.api", False, ["pier.control.request_limits"]),
    ("from .resource_store import ResourceStore", "pier.control.api", False, ["pier.control.resource_store"]),
    ("from ..errors import ControlError", "pier.control.fetch.model_store", False, ["pier.control.errors"]),
    ("from .fetch import s3", "pier.control", True, ["pier.control.fetch.s3"]),
    ("def f():\n    from pier.engine.devices import gpus", "pier.gpus", False, ["pier.engine.devices"]),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pier.backends.base import Backend",
     "pier.gateway.run", False, ["pier.backends.base"]),
    ("import json\nfrom fastapi import FastAPI", "pier.gateway.app", False, []),
])
def test_imports_are_read_wherever_they_stand(text: str, module: str, package: bool, targets: list[str]) -> None:
    assert [i.target for i in imports_of(text, module, package=package, src=SRC)] == targets


@pytest.mark.parametrize(("edges", "found"), [
    ({"a": {"b"}, "b": {"c"}}, []),
    ({"a": {"b"}, "b": {"a"}}, ["a", "b", "a"]),
    ({"a": {"b"}, "b": {"c"}, "c": {"b"}}, ["b", "c", "b"]),
    ({"x": set(), "a": {"b", "x"}, "b": {"x"}}, []),
])
def test_a_cycle_is_found_with_its_nodes(edges: dict[str, set[str]], found: list[str]) -> None:
    assert cycle(edges) == found
