"""The dashboard's claims view, directive roster and landscape events in Chromium, against
a live bucket-sync on the local store; an organizer posts a directive from the page."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.bucketsync.coordination.conftest import Site
from tests.bucketsync.dashboard.browser import chromium

TIMEOUT_MS = 10_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def open_page(site: Site, browser: Any, hash_: str) -> Any:
    context = browser.new_context(viewport={"width": 1200, "height": 900}, base_url=site.base)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto(f"/dashboard{hash_}")
    return page


def test_claims_view_shows_live_and_expired_claims_with_overlaps(site: Site, browser: Any) -> None:
    old = site.claim("agent-3", "quantize the model to int8", ttl_hours=1).json()["filename"]
    site.clock.advance(2 * 3600)
    first = site.claim("agent-1", "label smoothing 0.1 on the resnet baseline").json()
    site.clock.advance(1)
    second = site.claim("agent-2", "resnet baseline with label smoothing 0.1").json()

    page = open_page(site, browser, "#/claims")
    page.wait_for_selector("#claims tbody tr")

    rows = page.locator("#claims tbody tr")
    assert rows.count() == 2
    assert page.locator(f"#claims tr[data-claim='{second['filename']}'] td.agent").inner_text() == (
        "agent-2"
    )
    overlapping = page.locator(f"#claims tr[data-claim='{second['filename']}']").inner_text()
    assert "live" in overlapping and overlapping.rstrip().endswith("1")
    assert first["filename"] in (
        page.locator(f"tr[data-claim='{second['filename']}'] td.num").get_attribute("title") or ""
    )
    expired = page.locator(f"#expired-claims tr[data-claim='{old}']").inner_text()
    assert "expired" in expired and "int8" in expired
    page.screenshot(path=str(site.home / "claims.png"), full_page=True)


def test_directive_roster_shows_who_has_and_has_not_acked(site: Site, browser: Any) -> None:
    old = site.directive("Use the v1 eval set.").json()["filename"]
    site.clock.advance(1)
    new = site.directive("Use the v2 eval set.", supersedes=old).json()["filename"]
    site.ack("agent-2", new)

    page = open_page(site, browser, "#/directives")
    page.wait_for_selector("#directives tbody tr")
    listed = page.locator(f"#directives tr[data-directive='{new}']").inner_text()
    assert "pinned" in listed and "1 / 3" in listed
    assert f"superseded by {new}" in page.locator(f"tr[data-directive='{old}']").inner_text()

    page.click(f"a[href='#/directives/{new}']")
    page.wait_for_selector("#acked li")
    assert page.locator("#acked li").all_inner_texts() == ["agent-2"]
    assert page.locator("#not-acked li").all_inner_texts() == ["agent-1", "agent-3"]
    assert "Use the v2 eval set." in page.inner_text("main")
    page.screenshot(path=str(site.home / "directive.png"), full_page=True)


def test_an_organizer_posts_a_directive_from_the_dashboard(site: Site, browser: Any) -> None:
    page = open_page(site, browser, "")
    page.fill("input[name=token]", site.world.tokens["boss"])
    page.click("form.signin button[type=submit]")
    page.wait_for_selector("[data-testid=signed-in]:has-text('human-boss')")
    page.goto(f"{site.base}/dashboard#/directives")
    page.wait_for_selector("#post-directive textarea")

    page.fill("#post-directive textarea", "Everyone: rerun with seed 7.")
    page.click("#post-directive button[type=submit]")
    page.wait_for_selector("#directives tbody tr")

    listed = site.http.get("/v1/directives").json()["items"]
    assert len(listed) == 1
    pinned = site.http.get("/v1/digest", params={"as": "agent-1"}).json()["directives"]
    assert pinned["items"][0]["body"].strip() == "Everyone: rerun with seed 7."
    assert pinned["items"][0]["agent"] == "human-boss"


def test_leaderboard_shows_champion_changes_and_an_agents_landscape_events(
    site: Site, browser: Any
) -> None:
    for agent, score in (("agent-1", 0.8), ("agent-2", 0.9)):
        site.clock.advance(1)
        text = f"---\nscore: {score}\nmethod: m\nstatus: agent-run\ndescription: d\n---\n{agent}\n"
        assert site.world.put(agent, "r.md", text).status_code == 201
        posted = site.http.post("/v1/results", json={"source": site.world.uri(agent, "r.md")})
        assert posted.status_code == 201, posted.text

    page = open_page(site, browser, "#/leaderboard")
    page.wait_for_selector("#champion-changes li")

    changes = page.locator("#champion-changes li").all_inner_texts()
    assert len(changes) == 2
    assert "agent-1 (0.8) -> agent-2 (0.9)" in changes[0] and "nobody -> agent-1" in changes[1]
    page.click("#leaderboard a.events-of:has-text('agent-1')")
    page.wait_for_selector("#agent-events li")
    told = page.locator("#agent-events li").all_inner_texts()
    assert any("overtaken" in t and "Passed by agent-2: agent-1 (1 -> 2)" in t for t in told)
    assert page.locator("#agent-events .badge.leaderboard-overtaken").count() == 1
    page.screenshot(path=str(site.home / "landscape.png"), full_page=True)
