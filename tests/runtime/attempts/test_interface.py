"""The attempt loop is one unit: code outside pier.runtime.attempts imports its interface (the package's __init__),
never one of its modules, so what is inside can change without its callers."""

from __future__ import annotations

import ast
from pathlib import Path

PIER = Path(__file__).resolve().parents[3] / "src" / "pier"
PACKAGE = "pier.runtime.attempts"


def test_callers_import_the_package_not_its_modules() -> None:
    reaching = []
    for path in sorted(PIER.rglob("*.py")):
        if path.is_relative_to(PIER / "runtime" / "attempts"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            reaching += [f"{path.relative_to(PIER)}:{node.lineno}" for name in names
                         if name.startswith(PACKAGE + ".")]
    assert not reaching, f"import these from {PACKAGE} (add to its __all__ if needed): {reaching}"
