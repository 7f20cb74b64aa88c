"""The dashboard's leaderboard in a real browser (issue 19, item 4): an organizer baseline
sits among the ranked rows, flagged and unranked, and the CSV download link saves the
same file the API serves."""

from __future__ import annotations

import csv
import io
import json
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


def promote(world: World, agent: str, path: str, score: float, token: str | None = None,
            **extra: Any) -> None:  # fmt: skip
    fm = {"score": score, "method": "greedy", "status": "agent-run", "description": path, **extra}
    text = "---\n" + "".join(f"{k}: {json.dumps(v)}\n" for k, v in fm.items()) + "---\nnotes\n"
    assert world.put(agent, path, text).status_code == 201
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = world.client.post(
        "/v1/results", json={"source": world.uri(agent, path)}, headers=headers
    )
    assert response.status_code == 201, response.text


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[str, World]]:
    settings = make_settings(tmp_path / "data")
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(settings, store=LocalBucketStore(settings.data_dir), identity=identity)
    with live_server(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        world = World(client, app.state.hub, identity)  # type: ignore[arg-type]
        for agent in ("alpha", "beta"):
            world.agent(agent)
        promote(world, "alpha", "r/1.md", 0.72)
        promote(world, "beta", "r/1.md", 0.41)
        token = world.user("olive", role="admin")
        world.agent("reference", "olive")
        promote(world, "reference", "r/1.md", 0.55, token=token, baseline=True)
        yield base, world


def test_a_baseline_is_flagged_unranked_among_the_rows_and_the_csv_downloads(
    site: tuple[str, World], tmp_path: Path
) -> None:
    base, world = site
    with chromium() as browser:
        context = browser.new_context(base_url=base, accept_downloads=True)
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        page.goto("/dashboard")
        page.wait_for_selector("#leaderboard tbody tr[data-baseline=true]")

        rows = page.locator("#leaderboard tbody tr")
        agents = [rows.nth(i).get_attribute("data-agent") for i in range(rows.count())]
        ranks = page.locator("#leaderboard tbody tr td:first-child").all_inner_texts()
        flagged = page.locator(
            "#leaderboard tr[data-baseline=true] .badge.baseline"
        ).all_inner_texts()
        page.screenshot(path=str(tmp_path / "leaderboard-baseline.png"), full_page=True)
        with page.expect_download() as info:
            page.click("#leaderboard-csv")
        saved = tmp_path / "board.csv"
        info.value.save_as(saved)
        suggested = info.value.suggested_filename
        context.close()

    assert agents == ["alpha", "reference", "beta"]  # by score, the baseline in between
    assert ranks == ["1", "—", "2"]  # beta stays second: the baseline takes no rank
    assert flagged == ["baseline"]
    assert suggested.startswith("chal-leaderboard-board-") and suggested.endswith(".csv")
    served = world.client.get("/v1/leaderboard", params={"format": "csv"}).text
    downloaded = list(csv.DictReader(io.StringIO(saved.read_text())))
    assert downloaded == list(csv.DictReader(io.StringIO(served)))
    assert [(r["agent"], r["baseline"], r["rank"]) for r in downloaded] == [
        ("alpha", "false", "1"),
        ("beta", "false", "2"),
        ("reference", "true", ""),
    ]
