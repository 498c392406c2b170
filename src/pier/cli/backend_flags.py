"""`pier up`'s options for the backends' settings, built from the flags each backend declares once
(pier.backends.registry), so the CLI does not list them a second time."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Optional

import typer

from pier.backends.registry import FLAGS, KINDS, NAMES, BackendChoice, choose


def with_backend_flags(command: Callable[..., None]) -> Callable[..., None]:
    """`command` with every backend's flags (those `pier up` takes) as options after its --backend; their values
    reach it as `backend_flags`: flag key -> value (None when not given)."""
    flags = {flag.parameter: flag for flag in FLAGS if flag.in_pier_up}
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "backend_flags"]
    added = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=Annotated[
        Optional[flag.type], typer.Option(flag.option, help=flag.help)])  # noqa: UP045 (a runtime type)
        for name, flag in flags.items()]

    @functools.wraps(command)
    def run(**values: Any) -> None:
        given = {flags[name].key: values.pop(name) for name in flags}
        command(**values, backend_flags=given)

    at = next((i + 1 for i, p in enumerate(own) if p.name == "backend"), len(own))  # after --backend
    signature = inspect.Signature([*own[:at], *added, *own[at:]])
    run.__signature__ = signature  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
    return run


def chosen_backend(name: str, values: Mapping[str, Any]) -> BackendChoice:
    """The backend `--backend` names, with its options validated; typer.BadParameter names the flag at fault."""
    if name not in KINDS:
        raise typer.BadParameter(f"use one of {', '.join(NAMES)}", param_hint="--backend")
    try:
        return choose(name, values)
    except ValueError as error:
        flags = KINDS[name].flags
        given = [flag.option for flag in flags if values.get(flag.key) is not None] or [f.option for f in flags]
        raise typer.BadParameter(str(error), param_hint=", ".join(given)) from None
