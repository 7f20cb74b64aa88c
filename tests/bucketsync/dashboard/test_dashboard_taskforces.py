"""The dashboard's Taskforces page in a real browser against a live bucket-sync: the list,
one taskforce's README, notes and files, and a file's bytes through the dashboard proxy."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.local import LocalBucketStore
from tests.bucketsync.conftest import ORG, World, make_settings
from tests.bucketsync.dashboard.browser import chromium
from tests.support.servers import live_server

TIMEOUT_MS = 10_000


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, World, Path, Any]]:
    root = tmp_path_factory.mktemp("taskforces")
    settings = make_settings(root / "data")
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(settings, store=LocalBucketStore(settings.data_dir), identity=identity)
    with (
        chromium() as browser,
        live_server(app) as base,
        httpx.Client(base_url=base, timeout=30) as client,
    ):
        world = World(client, app.state.hub, identity)  # type: ignore[arg-type]
        world.agent("alpha")
        world.agent("beta")
        made = client.post(
            "/v1/taskforces",
            json={"name": "kernels", "agent_id": "alpha", "body": "# Kernels\n\nFaster attention."},
        )
        assert made.status_code == 201, made.text
        note = {"agent_id": "beta", "body": "profiled: **40%** in softmax"}
        assert client.post("/v1/taskforces/kernels/files", json=note).status_code == 201
        assert world.put("beta", "out/p.json", '{"tps": 9}').status_code == 201
        named = {"source": world.uri("beta", "out/p.json"), "dest_path": "prof/p_beta.json"}
        assert client.post("/v1/taskforces/kernels/files", json=named).status_code == 201
        yield base, world, root, browser


def test_the_taskforces_page_lists_them_and_opens_one(
    site: tuple[str, World, Path, Any],
) -> None:
    base, _world, root, browser = site
    page = browser.new_context(base_url=base).new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto("/dashboard#/taskforces")
    page.wait_for_selector("#taskforces tr[data-taskforce=kernels]")
    row = page.inner_text("#taskforces tr[data-taskforce=kernels]")
    assert "Faster attention." in row and "alpha, beta" in row
    page.screenshot(path=str(root / "taskforces.png"), full_page=True)

    page.click("a[href='#/taskforces/kernels']")
    page.wait_for_selector("#taskforce-notes li")
    assert "Kernels" in page.inner_text(".readme")
    assert page.inner_html("#taskforce-notes").count("<strong>40%</strong>") == 1
    assert "prof/p_beta.json" in page.inner_text("#taskforce-files")
    page.screenshot(path=str(root / "taskforce.png"), full_page=True)

    href = page.get_attribute("#taskforce-files a", "href")
    assert href is not None and href.startswith("/dashboard/api/v1/taskforces/kernels/files/")
    served = page.request.get(
        page.locator("#taskforce-files a", has_text="p_beta.json").get_attribute("href") or ""
    )
    assert served.status == 200 and served.body() == b'{"tps": 9}'
