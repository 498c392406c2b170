"""Adapter inference components: a LoRA adapter (`Specification.BaseInferenceComponentName` and
`Container.ArtifactUrl`) served by its base component's copies.

An adapter has no copies, cores or memory of its own (SageMaker: "it uses the compute resources of the base
inference component"). Its artifact is fetched like a model's; it is InService once the folder holds one GGUF
LoRA adapter and its base is InService. The gateway sends its invocations to the base's copies, naming the adapter
file in headers (`adapter_headers`, `adapter_files`: the file as each copy reads it, on its node); a copy loads it
on first use and keeps it (pier.server.adapters).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pier.channel.headers import ADAPTER_FILE_HEADER, ADAPTER_HEADER, ADAPTER_SCALE_HEADER
from pier.control.errors import ValidationError
from pier.control.records import ComponentRecord
from pier.control.shapes import ComponentSpec
from pier.lora_file import MAX_WEIGHT, adapter_problem, base_mismatch

SCALE_VARIABLE = "PIER_LORA_SCALE"  # the adapter component's Container.Environment may set its scale (default 1)


def is_adapter(record: ComponentRecord) -> bool:
    return record.specification.BaseInferenceComponentName is not None


def base_name(record: ComponentRecord) -> str:
    name = record.specification.BaseInferenceComponentName
    assert name is not None
    return name


def adapters_of(base: str, components: Iterable[ComponentRecord]) -> list[ComponentRecord]:
    return [c for c in components if is_adapter(c) and base_name(c).lower() == base.lower()]


def check_base(base: ComponentRecord | None, name: str, endpoint: str) -> ComponentRecord:
    """The base a new adapter names, if it can take one."""
    if base is None or base.status == "Deleting":
        raise ValidationError(f'BaseInferenceComponentName "{name}" names no inference component: create the base '
                              "component (the model the adapter adapts) first.")
    if is_adapter(base):
        raise ValidationError(f'Inference component "{base.name}" is itself an adapter: name the component that '
                              "serves the base model as BaseInferenceComponentName.")
    if base.endpoint.lower() != endpoint.lower():
        raise ValidationError(f'Base inference component "{base.name}" is on endpoint "{base.endpoint}", not '
                              f'"{endpoint}": create the adapter on the base\'s endpoint.')
    return base


def scale(record: ComponentRecord) -> float:
    container = record.specification.Container
    raw = container.Environment.get(SCALE_VARIABLE, "1") if container is not None else "1"
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or abs(value) > MAX_WEIGHT:  # NaN or a huge scale: every answer empty
        raise ValidationError(f"{SCALE_VARIABLE}={raw!r} is not a finite number up to {MAX_WEIGHT:g}: give the "
                              "adapter's scale, like 1 or 0.5.")
    return value


@functools.lru_cache(maxsize=1024)
def adapter_file(model_dir: str) -> Path:
    """The one GGUF LoRA adapter in a fetched artifact folder; raises ValueError saying what the folder lacks."""
    found = sorted(p for p in Path(model_dir).rglob("*.gguf") if p.is_file())
    if len(found) != 1:
        what = "no .gguf file" if not found else f"{len(found)} .gguf files ({', '.join(p.name for p in found)})"
        raise ValueError(f"The adapter's artifact holds {what}: give a folder or archive holding one GGUF LoRA "
                         "adapter (convert a PEFT adapter with llama.cpp's convert_lora_to_gguf.py).")
    problem = adapter_problem(found[0])
    if problem:
        raise ValueError(problem)
    return found[0]


def update_change(record: ComponentRecord, specification: ComponentSpec) -> dict[str, Any]:
    """What UpdateInferenceComponent changes on an adapter. One that serves keeps its fetched folder, which its
    invocations use until the new artifact is fetched (SageMaker serves a component while it updates); the
    missing `weights_mb` is what makes the reconciler fetch the new one, and `readiness` wait for it."""
    keep = record.model_dir if record.status == "InService" else None
    return {"specification": specification, "model_dir": keep, "weights_mb": None}


def readiness(record: ComponentRecord, base: ComponentRecord | None) -> tuple[bool, str]:
    """(ready, problem) of an adapter: its artifact fetched and valid, and its base InService."""
    if record.model_dir is None or record.weights_mb is None:  # not fetched yet (an update: the old folder)
        return False, ""
    try:
        adapter = adapter_file(record.model_dir)
    except ValueError as error:
        return False, str(error)
    if base is None:
        return False, f'Its base inference component "{base_name(record)}" is gone.'
    if (problem := _shape_problem(adapter, base)) is not None:
        return False, problem
    if base.status == "Failed":
        return False, f'Its base inference component "{base.name}" failed: {base.failure_reason}'
    return base.status in ("InService", "Updating"), ""


def _shape_problem(adapter: Path, base: ComponentRecord) -> str | None:
    """An adapter made for another model fails here, before it goes InService (llama.cpp would refuse it at its
    first invocation, every time); a base whose folder does not hold exactly one GGUF is not checked."""
    found = sorted(p for p in Path(base.model_dir).rglob("*.gguf") if p.is_file()) if base.model_dir else []
    if len(found) != 1:
        return None
    try:
        return base_mismatch(adapter, found[0])
    except Exception:
        return None


def adapter_headers(record: ComponentRecord) -> dict[str, str]:
    """What a base copy is told with each of the adapter's requests, but for the file (`adapter_files`)."""
    return {ADAPTER_HEADER: record.name, ADAPTER_SCALE_HEADER: repr(scale(record))}


def adapter_files(record: ComponentRecord) -> dict[str, str]:
    """The header naming the adapter's GGUF on the gateway's host; each copy is sent the path where it reads it
    (Backend.path_on: a copy on another Ray node gets the file first)."""
    assert record.model_dir is not None
    return {ADAPTER_FILE_HEADER: str(adapter_file(record.model_dir))}
