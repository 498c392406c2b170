"""Without Chromium or Playwright the browser tests skip, saying how to install what is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.console import browser


def test_a_missing_chromium_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(browser, "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.setattr(browser.shutil, "which", lambda name: None)
    reason = browser.missing()
    assert reason is not None and "apt-get install -y chromium chromium-driver" in reason


def test_a_missing_playwright_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(browser.importlib.util, "find_spec", lambda name: None)
    reason = browser.missing()
    assert reason is not None and "pip install -e '.[test]'" in reason
