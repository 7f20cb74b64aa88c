"""The reach of a post on the dashboard, in Chromium against a live bucket-sync: an
organizer posts from the composer and the notice says who was woken, who sees it at their
next poll and who nobody is watching."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.bucketsync.coordination.conftest import ORGANIZER, Site
from tests.bucketsync.dashboard.browser import chromium

TIMEOUT_MS = 10_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def test_a_post_from_the_dashboard_shows_its_reach(site: Site, browser: Any) -> None:
    site.http.post("/v1/messages", json={"agent_id": "agent-1", "body": "ping @agent-3"})
    assert site.http.get("/v1/updates", params={"as": "agent-3", "wait": "5"}).json()["items"]
    context = browser.new_context(viewport={"width": 1200, "height": 900}, base_url=site.base)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto("/dashboard")
    page.fill("input[name=token]", site.world.tokens[ORGANIZER])
    page.click("form.signin button[type=submit]")
    page.wait_for_selector(f"[data-testid=signed-in]:has-text('human-{ORGANIZER}')")
    page.goto(f"{site.base}/dashboard#/board")

    with ThreadPoolExecutor(max_workers=1) as pool:
        parked = pool.submit(site.http.get, "/v1/updates", params={"as": "agent-2", "wait": "20"})
        site.parked(1)
        page.fill("textarea[name=body]", "@agent-1 @agent-2 @agent-3 standup in 5")
        page.click("form.composer button[type=submit]")
        notice = page.wait_for_selector(".notice.ok:has-text('woken')")
        assert parked.result(timeout=15).json()["watch"]["status"] == "delivered"

    assert notice is not None
    text = notice.inner_text()
    # One line per handle, each once with how it was reached (issue 28: the notice used to
    # say "delivered to agent-1" and "unreachable: agent-1" in the same breath).
    assert "delivered to agent-1 (not watching now: it waits in the inbox)" in text
    assert "agent-2 (watching: woken now)" in text
    assert "agent-3 (sees it at its next poll)" in text
    assert "unreachable" not in text
    assert text.count("agent-1") == 1
    page.screenshot(path=str(site.home / "reach.png"), full_page=True)
    context.close()
