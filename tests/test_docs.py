"""docs/architecture.md stays the page a newcomer reads in ten minutes (issue 38): the map, not the file tables, which
live in docs/packages.md and docs/engine.md."""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
MAX_LINES = 600


def test_the_architecture_page_stays_short() -> None:
    lines = len((DOCS / "architecture.md").read_text().splitlines())
    assert lines < MAX_LINES, (f"docs/architecture.md has {lines} lines: move file-level detail to docs/packages.md or "
                               "docs/engine.md, and keep the map")


def test_the_pages_it_points_to_exist() -> None:
    text = (DOCS / "architecture.md").read_text()
    for page in ("packages.md", "engine.md", "features.md"):
        assert f"docs/{page}" in text and (DOCS / page).is_file(), page
