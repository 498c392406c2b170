"""Every X-Pier-* header is declared once, in pier.channel.headers' table, and everything names it from there."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from pier.channel import headers
from pier.channel.headers import HEADERS, PierHeader

PIER = Path(headers.__file__).resolve().parents[1]
TABLE = Path(headers.__file__).resolve()
NAMED = re.compile(r"x-pier-", re.IGNORECASE)


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes: prose may name a header; code must use the constant."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def header_literals(text: str) -> Iterator[tuple[int, str]]:
    """Each string (or bytes) literal in code that spells an X-Pier-* header, with its line."""
    tree = ast.parse(text)
    prose = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in prose and isinstance(node.value, (str, bytes)):
            value = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
            if NAMED.search(value):
                yield node.lineno, value


@pytest.mark.parametrize(("text", "found"), [
    ('ADAPTER_HEADER = "X-Pier-Adapter"', [(1, "X-Pier-Adapter")]),
    ('ADAPTER_HEADER = b"x-pier-adapter"', [(1, "x-pier-adapter")]),
    ('def f(h):\n    return h.get(f"X-PIER-{h}")', [(2, "X-PIER-")]),
    ('"""Sends X-Pier-Adapter."""\nx = 1  # X-Pier-Adapter', []),
    ('def f():\n    """Reads X-Pier-Refused."""\n    return "X-Amzn-SageMaker-Target-Model"', []),
])
def test_header_literals_are_found_in_code_not_in_prose(text: str, found: list[tuple[int, str]]) -> None:
    assert list(header_literals(text)) == found


def test_no_x_pier_header_is_spelled_outside_the_table() -> None:
    spelled = [f"{path.relative_to(PIER.parent)}:{line}: {value!r}"
               for path in sorted(PIER.rglob("*.py")) if path != TABLE
               for line, value in header_literals(path.read_text())]
    assert not spelled, ("X-Pier-* headers spelled outside pier.channel.headers; declare each there (name, way, "
                         "meaning) and import its constant:\n  " + "\n  ".join(spelled))


def test_each_row_is_a_header_of_its_own() -> None:
    declared = {name: value for name, value in vars(headers).items() if name.isupper() and isinstance(value, str)
                and NAMED.match(value)}
    assert sorted(h.name for h in HEADERS.values()) == sorted(declared.values())
    for row in HEADERS.values():
        assert isinstance(row, PierHeader) and row.name.startswith("X-Pier-") and row.meaning and row.module
        assert row.way in (headers.REQUEST, headers.RESPONSE, headers.CLIENT)


def test_each_header_of_the_table_is_used() -> None:
    constants = {name for name, value in vars(headers).items() if isinstance(value, str) and value in
                 {h.name for h in HEADERS.values()}}
    code = "\n".join(path.read_text() for path in PIER.rglob("*.py") if path != TABLE)
    unused = sorted(name for name in constants if not re.search(rf"\b{name}\b", code))
    assert not unused, f"{unused} are declared in pier.channel.headers but nothing sends or reads them"
