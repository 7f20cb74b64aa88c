"""Debian's Chromium driven by Playwright: in CI a missing browser fails the tests,
locally it skips them (`.ci/run` installs the `chromium` package)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.support.databases import services_required

CHROMIUM = os.environ.get("AGENTHUB_TEST_CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _unavailable(reason: str) -> None:
    if services_required():
        pytest.fail(f"{reason}; CI requires the browser tests to run", pytrace=False)
    pytest.skip(reason)


@contextmanager
def chromium() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[test]')")
    if not os.path.exists(CHROMIUM):
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS
        )
        try:
            yield browser
        finally:
            browser.close()
