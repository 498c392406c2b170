"""The table of PIER_* settings is whole (every name src/pier reads is in it) and docs/settings.md is written
from it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from pier.variables import BY_NAME, CLI, COPY, GATEWAY, VARIABLES, WORKER, markdown

ROOT = Path(__file__).resolve().parents[1]
PIER = ROOT / "src" / "pier"
NAME = re.compile(r"\bPIER_[A-Z][A-Z0-9_]*\b")


def names_in(text: str) -> set[str]:
    """The PIER_* names a module's string literals spell (a setting read, set, or named to the user)."""
    return {name for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) for name in NAME.findall(node.value)}


@pytest.mark.parametrize(("text", "found"), [
    ('read.get("PIER_QUEUE_SIZE", cast=integer())', {"PIER_QUEUE_SIZE"}),
    ('x = f"set PIER_KV_CACHE_MB={y}"', {"PIER_KV_CACHE_MB"}),
    ('PIER_ROOT = "/src"  # PIER_NOT_READ', set()),  # Python names and comments are no settings
    ('PREFIXES = ("LC_", "PIER_")', set()),
])
def test_names_are_read_from_string_literals(text: str, found: set[str]) -> None:
    assert names_in(text) == found


def test_every_pier_setting_in_src_is_in_the_table() -> None:
    spelled = {name: path for path in sorted(PIER.rglob("*.py")) for name in names_in(path.read_text())}
    missing = sorted(f"{name} ({path.relative_to(ROOT)})" for name, path in spelled.items() if name not in BY_NAME)
    stale = sorted(set(BY_NAME) - set(spelled))
    assert not missing, f"Add {missing} to VARIABLES in src/pier/variables.py, then python -m pier.variables " \
                        "docs/settings.md."
    assert not stale, f"{stale} are in src/pier/variables.py but nothing in src/pier reads them: take them out."


def test_each_setting_is_one_row_with_every_column() -> None:
    assert len(BY_NAME) == len(VARIABLES)
    for variable in VARIABLES:
        assert variable.type and variable.default and variable.meaning, variable
        assert set(variable.reader.split(", ")) <= {GATEWAY, COPY, CLI, WORKER}, variable


def test_the_committed_doc_is_the_table() -> None:
    assert (ROOT / "docs" / "settings.md").read_text() == markdown(), (
        "docs/settings.md differs from src/pier/variables.py: run python -m pier.variables docs/settings.md")
