"""Issue 14's dashboard fixes in Chromium: invalid results in neither the table nor the
chart, markdown rendered and raw HTML kept as text, the challenge's branding in the
header, a scroll hint on wide tables at phone width, /favicon.ico, and a board search
that says why it found nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from tests.bucketsync.conftest import ORG, World, make_settings
from tests.bucketsync.dashboard.browser import chromium
from tests.bucketsync.dashboard.test_dashboard_browser import PHONE, TIMEOUT_MS, post_result
from tests.support.servers import live_server

TITLE, TAGLINE = "Prime hunt", "Find the primes, together."


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    root = tmp_path_factory.mktemp("dashboard-fixes")
    settings = make_settings(
        root / "data", CHALLENGE_TITLE=TITLE, CHALLENGE_TAGLINE=TAGLINE, LISTING_TTL_S="0"
    )
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(settings, store=LocalBucketStore(settings.data_dir), identity=identity)
    with (
        chromium() as browser,
        live_server(app) as base,
        httpx.Client(base_url=base, timeout=30) as client,
    ):
        world = World(client, app.state.hub, identity)  # type: ignore[arg-type]
        for agent in ("alpha", "beta", "gamma-with-a-long-agent-name"):
            world.agent(agent)
        post_result(world, "alpha", "r/1.md", 0.41)
        post_result(world, "gamma-with-a-long-agent-name", "r/1.md", 0.35)
        post_result(world, "beta", "r/1.md", 0.99)
        invalid = client.get("/v1/results", params={"agent": "beta"}).json()["items"][0]
        verdicts = json.dumps({invalid: "invalid"}).encode()
        world.hub.store.write_batch(
            world.hub.central, Batch(adds=[("results/verification_status.json", verdicts)])
        )
        body = "**bold move** and `code` <img src=x onerror=\"document.title='pwned'\">"
        assert world.raw("alpha", body).status_code == 201
        world.user("boss", role="admin")
        made = client.post(
            "/v1/channels",
            json={"name": "eval", "agent_id": "human-boss", "body": "evaluation talk"},
            headers=world.auth("boss"),
        )
        assert made.status_code == 201, made.text
        posted = client.post(
            "/v1/messages",
            json={"agent_id": "human-boss", "body": "zanzibar only here", "channel": "eval"},
            headers=world.auth("boss"),
        )
        assert posted.status_code == 201, posted.text
        yield base, browser


def open_page(site: tuple[str, Any], path: str, viewport: dict[str, int] | None = None) -> Any:
    base, browser = site
    context = browser.new_context(
        viewport=viewport or {"width": 1200, "height": 900}, base_url=base
    )
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto(path)
    return page


def test_an_invalid_result_is_in_neither_the_table_nor_the_chart(site: tuple[str, Any]) -> None:
    page = open_page(site, "/dashboard")
    page.wait_for_selector("#leaderboard tbody tr")
    agents = page.locator("#leaderboard td.agent").all_inner_texts()
    assert "beta" not in agents and "alpha" in agents
    page.wait_for_selector("figure.chart polyline", state="attached")
    plotted = page.locator("figure.chart polyline").evaluate_all(
        "lines => lines.map(l => l.dataset.agent)"
    )
    assert "beta" not in plotted and "alpha" in plotted


def test_markdown_renders_and_raw_html_stays_text(site: tuple[str, Any]) -> None:
    page = open_page(site, "/dashboard#/board")
    page.wait_for_selector("ol.messages li")
    message = page.locator("ol.messages li", has_text="bold move")
    assert message.locator(".body strong").inner_text() == "bold move"
    assert message.locator(".body code").inner_text() == "code"
    assert message.locator("img").count() == 0
    assert "<img src=x onerror=" in message.locator(".body").inner_text()
    assert page.title() != "pwned"


def test_the_branding_title_and_tagline_are_in_the_header(site: tuple[str, Any]) -> None:
    page = open_page(site, "/dashboard")
    page.wait_for_selector(f"header #title:has-text('{TITLE}')")
    assert page.locator("header #tagline").inner_text() == TAGLINE
    page.wait_for_function(f"document.title.includes({json.dumps(TITLE)})")


def test_at_390px_a_wide_table_shows_a_scroll_hint(site: tuple[str, Any]) -> None:
    page = open_page(site, "/dashboard#/agents", PHONE)
    page.wait_for_selector("#agents tbody tr")
    page.wait_for_function("document.querySelector('#view .scroll') !== null")
    boxes = page.locator("#view .scroll").evaluate_all(
        "bs => bs.map(b => ({cut: b.scrollWidth > b.clientWidth + 1,"
        " hinted: b.classList.contains('overflowing') &&"
        " getComputedStyle(b, '::before').content.includes('scroll')}))"
    )
    assert any(box["cut"] for box in boxes), "the test needs a table wider than a phone"
    assert all(box["hinted"] for box in boxes if box["cut"])
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_the_favicon_is_served(site: tuple[str, Any]) -> None:
    response = httpx.get(f"{site[0]}/favicon.ico")
    assert response.status_code == 200 and response.headers["content-type"].startswith("image/")


def test_a_search_matching_only_a_channel_post_says_so(site: tuple[str, Any]) -> None:
    page = open_page(site, "/dashboard#/board")
    page.wait_for_selector("ol.messages li")
    page.fill("input[name=q]", "zanzibar")
    page.click("form.search button")
    notice = page.wait_for_selector(".empty-search")
    assert notice is not None
    text = notice.inner_text()
    assert "zanzibar" in text and "Channel" in text and "Nothing here yet." not in text
