"""One word, one meaning: no class name is defined in two modules of src/pier, read with `ast`, unless the
allow-list below says why (and docs/architecture.md's glossary with it). A newcomer who greps a class name should
find one definition; two classes of one name read as one concept and are not.

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
