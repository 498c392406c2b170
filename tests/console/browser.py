"""Debian's Chromium driven by Playwright, for the console's browser tests and its screenshots. Playwright's own
browser download is never used: CI installs `chromium` with apt (.ci/run)."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WIDE = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def missing() -> str | None:
    """Why the browser tests cannot run here, with how to fix it; None when they can."""
    if importlib.util.find_spec("playwright") is None:
        return "Python Playwright is missing: pip install -e '.[test]'"
    if not CHROMIUM.exists() and shutil.which("chromium") is None:
        return "Chromium is missing: apt-get install -y chromium chromium-driver (as CI does in .ci/run)"
    return None


@contextmanager
def chromium(*args: str) -> Iterator[Any]:
    """The browser, with `args` after pier's own (such as a certificate it may trust)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=[*ARGS, *args], headless=True)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def watched_page(browser: Any) -> Iterator[Any]:
    """A wide page whose script errors (and anything the CSP had to block) fail the test when it closes."""
    context = browser.new_context(viewport=WIDE)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.on("console", lambda message: errors.append(message.text)
              if message.type == "error" and "Content Security Policy" in message.text else None)
    yield opened
    context.close()
    assert errors == [], errors  # no script error on any page, nothing the CSP had to block
