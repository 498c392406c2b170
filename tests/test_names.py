"""One word, one meaning: no class name is defined in two modules of src/pier, read with `ast`, and no module file
name (its stem) repeats under src/pier, unless an allow-list below says why (and docs/architecture.md's glossary
with it). A newcomer who greps a class name or opens `x.py` should find one definition; two of one name read as
one concept and are not.

A module's classes count wherever they are defined in it (nested in a function or a class too). Tests are not
read: a test's helper classes are its own business.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PIER = Path(__file__).resolve().parents[1] / "src" / "pier"

# Class names defined in more than one module, on purpose. Each entry says why; an entry whose name is no
# longer defined twice fails too, so the list stays the list of exceptions and nothing else.
ALLOWED: dict[str, str] = {
    # Each mirrors the modelled exception of its own AWS service, as boto3 names it (SageMaker's control plane;
    # Application Auto Scaling and CloudWatch), with that service's wire code and base class.
    "ResourceNotFound": "control.errors (SageMaker) and autoscaling.errors (Application Auto Scaling)",
    "UnknownOperation": "control.errors (SageMaker) and autoscaling.errors (Application Auto Scaling)",
}


def _classes() -> dict[str, set[str]]:
    """Each class name, and the modules (paths under src/pier) that define it."""
    defined: dict[str, set[str]] = defaultdict(set)
    for path in sorted(PIER.rglob("*.py")):
        module = str(path.relative_to(PIER))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                defined[node.name].add(module)
    return defined


def test_no_class_name_is_defined_in_two_modules() -> None:
    twice = {name: sorted(modules) for name, modules in _classes().items() if len(modules) > 1}
    unexplained = {name: modules for name, modules in twice.items() if name not in ALLOWED}
    assert not unexplained, (
        f"Class names defined in more than one module: {unexplained}. Name each concept once (grep before naming "
        "a class), or add the name to ALLOWED in tests/test_names.py with the reason, and to the glossary in "
        "docs/architecture.md."
    )


def test_every_allowed_name_is_still_defined_twice() -> None:
    twice = {name for name, modules in _classes().items() if len(modules) > 1}
    stale = sorted(set(ALLOWED) - twice)
    assert not stale, f"ALLOWED in tests/test_names.py lists names no longer defined twice: {stale}; remove them."


# Module file names (stems) under src/pier that more than one module has, on purpose: stem -> (the modules that
# have it, why). The modules are listed exactly, so a new module of an allowed stem fails too.
_FLAVORS = "each API flavor's own, side by side with the other flavor's"
ALLOWED_STEMS: dict[str, tuple[frozenset[str], str]] = {
    # Python's own names.
    "__init__": (frozenset(), "a package's interface: every package has one (not listed)"),
    "__main__": (frozenset({"__main__.py", "gateway/__main__.py"}), "`python -m pier` and `python -m pier.gateway`"),
    # One per package by design: the package's own errors, settings read where its process starts, its process's
    # assembled app. The package qualifies them, and each is that package's only module of the kind.
    "errors": (frozenset({"errors.py", "autoscaling/errors.py", "control/errors.py", "runtime/errors.py",
                          "security/errors.py", "server/byoc/errors.py", "server/errors.py",
                          "state_folder/errors.py"}), "each package's errors"),
    "settings": (frozenset({"autoscaling/settings.py", "gateway/settings.py", "runtime/settings.py",
                            "security/settings.py", "server/settings.py"}), "each package's settings"),
    "app": (frozenset({"cli/app.py", "gateway/app.py", "server/app.py", "server/multi_model/app.py"}),
            "each entry point's app (typer, FastAPI; a multi-model copy's own)"),
    # The two flavors (server/flavors/openai, server/flavors/tgi) are parallel on purpose: each API is a Spec for the
    # one pipeline, its request bodies, its answers' views and its routes, and a reader compares them file by file.
    # The flavor's package qualifies each, as a package qualifies its errors.
    "requests": (frozenset({"server/flavors/openai/requests.py", "server/flavors/tgi/requests.py"}), _FLAVORS),
    "routes": (frozenset({"server/flavors/openai/routes.py", "server/flavors/tgi/routes.py"}), _FLAVORS),
    "spec": (frozenset({"server/flavors/openai/spec.py", "server/flavors/tgi/spec.py"}), _FLAVORS),
    "views": (frozenset({"server/flavors/openai/views.py", "server/flavors/tgi/views.py"}), _FLAVORS),
}


def _stems() -> dict[str, set[str]]:
    """Each module file name's stem, and the modules (paths under src/pier) that have it."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in sorted(PIER.rglob("*.py")):
        found[path.stem].add(str(path.relative_to(PIER)))
    return found


def test_no_module_name_repeats() -> None:
    repeated = {stem: modules for stem, modules in _stems().items() if len(modules) > 1 and stem != "__init__"}
    unexplained = {stem: sorted(modules) for stem, modules in repeated.items()
                   if stem not in ALLOWED_STEMS or modules != ALLOWED_STEMS[stem][0]}
    assert not unexplained, (
        f"Module names under src/pier that more than one module has: {unexplained}. Name the module by what it "
        "holds, so that no other module has its name (grep first), or add it to ALLOWED_STEMS in "
        "tests/test_names.py with the reason."
    )


def test_every_allowed_stem_still_repeats() -> None:
    repeated = {stem for stem, modules in _stems().items() if len(modules) > 1}
    stale = sorted(set(ALLOWED_STEMS) - repeated)
    assert not stale, f"ALLOWED_STEMS in tests/test_names.py lists names no longer repeated: {stale}; remove them."
