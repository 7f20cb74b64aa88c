"""Debian's Chromium driven by Playwright: in CI a missing browser fails the tests,
locally it skips them (`.ci/run` installs the `chromium` package)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.local import LocalBucketStore
from tests.bucketsync.conftest import ORG, World, make_settings
from tests.support.databases import services_required
from tests.support.servers import live_server

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


@contextmanager
def live_world(data_dir: Path, **settings: str) -> Iterator[tuple[str, World]]:
    """A bucket-sync on the local store at `data_dir`, served on loopback: its URL and a
    `World` (a client to it, its hub and identity) to seed it."""
    configured = make_settings(data_dir, **settings)
    identity = LocalIdentity(configured.data_dir / "users.json", org=ORG)
    app = create_app(configured, store=LocalBucketStore(configured.data_dir), identity=identity)
    with live_server(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        yield base, World(client, app.state.hub, identity)  # type: ignore[arg-type]
