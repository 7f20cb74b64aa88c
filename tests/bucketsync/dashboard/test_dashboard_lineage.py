"""The dashboard draws a result's lineage in a real browser (issue 32): what it builds on
to the left, what builds on it to the right, an arrow per builds_on edge, its author's
credit, and a click on a result node opens that result."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.local import LocalBucketStore
from tests.bucketsync.conftest import ORG, World, make_settings
from tests.bucketsync.dashboard.browser import chromium
from tests.support.servers import live_server

TIMEOUT_MS = 10_000


def promote(world: World, agent: str, score: float, builds_on: list[str]) -> str:
    fm = {"score": score, "method": "m", "status": "agent-run", "description": "d"}
    if builds_on:
        fm["builds_on"] = builds_on
    text = "---\n" + "".join(f"{k}: {json.dumps(v)}\n" for k, v in fm.items()) + "---\n"
    assert world.put(agent, "r.md", text).status_code == 201
    response = world.client.post("/v1/results", json={"source": world.uri(agent, "r.md")})
    assert response.status_code == 201, response.text
    filename: str = response.json()["filename"]
    return filename


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    settings = make_settings(tmp_path / "data")
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(settings, store=LocalBucketStore(settings.data_dir), identity=identity)
    with live_server(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        world = World(client, app.state.hub, identity)  # type: ignore[arg-type]
        for agent in ("alpha", "beta", "gamma"):
            world.agent(agent)
        first = promote(world, "alpha", 0.5, [])
        second = promote(world, "beta", 0.6, [first])
        third = promote(world, "gamma", 0.7, [second, first])
        yield base, [first, second, third]


def test_the_result_page_draws_its_lineage_and_links_the_nodes(
    site: tuple[str, list[str]], tmp_path: Path
) -> None:
    base, (first, second, third) = site
    with chromium() as browser:
        context = browser.new_context(base_url=base)
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        page.goto(f"/dashboard#/result/{second}")
        page.wait_for_selector("svg#lineage-graph .lineage-node")
        nodes = page.locator("#lineage-graph .lineage-node")
        names = {nodes.nth(i).get_attribute("data-name") for i in range(nodes.count())}
        edges = page.locator("#lineage-graph .lineage-edge")
        pairs = {
            (edges.nth(i).get_attribute("data-from"), edges.nth(i).get_attribute("data-to"))
            for i in range(edges.count())
        }
        self_x = float(page.locator(".lineage-self rect").get_attribute("x") or 0)
        first_x = float(page.locator(f'[data-name="{first}"] rect').get_attribute("x") or 0)
        third_x = float(page.locator(f'[data-name="{third}"] rect').get_attribute("x") or 0)
        credit = page.inner_text("#lineage-credit")
        page.screenshot(path=str(tmp_path / "lineage.png"), full_page=True)
        page.click(f'[data-name="{third}"]')
        page.wait_for_selector(f"h2:has-text('{third}')")
        page.goto("/dashboard#/leaderboard")
        page.wait_for_selector("#leaderboard tbody tr td.credit")
        rows = page.locator("#leaderboard tbody tr")
        credits = {
            rows.nth(i).get_attribute("data-agent"): rows.nth(i).locator("td.credit").inner_text()
            for i in range(rows.count())
        }
        context.close()

    assert names == {first, second, third}
    assert pairs == {(second, first), (third, second), (third, first)}
    assert first_x < self_x < third_x  # ancestors left, descendants right
    assert "built on by 1 result of 1 other agent" in credit
    # alpha's result is built on by beta and gamma, beta's by gamma: the board's column.
    assert credits == {"gamma": "0", "beta": "1", "alpha": "2"}
