"""Organizer moderation from the standalone dashboard (`agenthub dashboard serve URL`,
issue 28): the page's verdict, hide and revoke go to the bucket-sync it fronts, over HTTP,
through that bucket-sync's own moderation routes, so the organizer check, the verdict's
compare-and-set and the audit row are the same as on bucket-sync's own dashboard; in
Chromium, and over HTTP for the refusals."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agenthub.bucketsync.dashboard.app import create_dashboard_app
from tests.bucketsync.conftest import World
from tests.bucketsync.dashboard.browser import chromium, live_world
from tests.bucketsync.dashboard.test_dashboard_browser import PHONE, TIMEOUT_MS, post_result
from tests.support.servers import live_server

DESKTOP = {"width": 1280, "height": 900}
PAGE = {"X-Agenthub-Dashboard": "1"}


@dataclass
class Fronted:
    world: World  # the bucket-sync, and a client to it
    dashboard: httpx.Client  # a client to the standalone dashboard in front of it
    base: str  # the standalone dashboard's URL

    def audit(self, action: str) -> list[dict[str, Any]]:
        month = f"{self.world.hub.clock.now():%Y%m}"
        return [r for r in self.world.hub.audit.rows(month) if r.get("action") == action]


@pytest.fixture
def fronted(tmp_path: Path) -> Iterator[Fronted]:
    with (
        live_world(tmp_path / "data", LISTING_TTL_S="0") as (upstream, world),
        live_server(create_dashboard_app(upstream)) as base,
        httpx.Client(base_url=base, timeout=30) as dashboard,
    ):
        world.user("boss", role="admin")
        world.user("carol", role="contributor")
        world.agent("alpha")
        world.agent("beta", "carol")
        post_result(world, "alpha", "r/1.md", 0.5)
        assert world.raw("alpha", "buy cheap tokens at spam.example").status_code == 201
        assert world.raw("alpha", "a useful note").status_code == 201
        yield Fronted(world, dashboard, base)


def sign_in(page: Any, fronted: Fronted, user: str) -> None:
    page.fill("input[name=token]", fronted.world.tokens[user])
    page.click("form.signin button[type=submit]")
    page.wait_for_selector(f"[data-testid=signed-in]:has-text('human-{user}')")


def test_an_organizer_moderates_from_the_standalone_dashboard(fronted: Fronted) -> None:
    world = fronted.world
    result = world.client.get("/v1/leaderboard").json()["rows"][0]["filename"]
    with chromium() as browser:
        context = browser.new_context(viewport=DESKTOP, base_url=fronted.base)
        context.set_default_timeout(TIMEOUT_MS)
        page = context.new_page()
        page.goto("/dashboard")
        sign_in(page, fronted, "boss")

        # A verdict: the index's compare-and-set on the bucket-sync, audited there.
        page.goto(f"/dashboard#/result/{result}")
        page.click("button[name=mark-invalid]")
        page.wait_for_selector(".notice.ok:has-text('marked invalid')")
        assert world.client.get(f"/v1/results/{result}").json()["verification"] == "invalid"
        [verdict] = fronted.audit("verdict")
        assert (verdict["result"], verdict["previous"], verdict["agent_id"]) == (
            result,
            "pending",
            "human-boss",
        )

        # Hiding a post: gone from the page, listed by the bucket-sync, audited.
        page.goto("/dashboard#/board")
        spam = page.locator("ol.messages li", has_text="spam.example")
        filename = spam.get_attribute("data-filename")
        spam.locator("button.hide-post").click()
        page.wait_for_selector(".notice.ok:has-text('Hidden')")
        page.wait_for_selector("ol.messages li:has-text('spam.example')", state="detached")
        assert world.client.get("/dashboard/moderation/hidden").json() == {"hidden": [filename]}
        assert [r["post"] for r in fronted.audit("hide")] == [filename]

        # Revoking a user.
        page.goto("/dashboard#/agents")
        revoke = page.locator("button.revoke[data-user=carol]")
        revoke.click()
        revoke.click()  # the second click confirms
        page.wait_for_selector(".notice.ok:has-text('Revoked carol')")
        assert world.client.get("/v1/me", headers=world.auth("carol")).json()["is_member"] is False
        assert [r["user"] for r in fronted.audit("revoke")] == ["carol"]

        # Anyone opening the standalone dashboard has the post hidden.
        anonymous = browser.new_context(viewport=PHONE, base_url=fronted.base).new_page()
        anonymous.goto("/dashboard#/board")
        anonymous.wait_for_selector("ol.messages li:has-text('a useful note')")
        assert anonymous.locator("ol.messages li:has-text('spam.example')").count() == 0


def test_the_standalone_dashboard_forwards_the_refusals(fronted: Fronted) -> None:
    world, dashboard = fronted.world, fronted.dashboard
    result = world.client.get("/v1/leaderboard").json()["rows"][0]["filename"]
    body = {"filename": result, "verdict": "invalid", "expected": "pending"}
    contributor = dashboard.post(
        "/dashboard/moderation/verdict", json=body, headers={**PAGE, **world.auth("carol")}
    )
    assert contributor.status_code == 403 and "org admins" in contributor.text
    anonymous = dashboard.post("/dashboard/moderation/verdict", json=body, headers=PAGE)
    assert anonymous.status_code == 401
    cookie_style = dashboard.post("/dashboard/moderation/verdict", json=body)
    assert cookie_style.status_code == 403 and "x-agenthub-dashboard" in cookie_style.text
    unknown = dashboard.post("/dashboard/moderation/delete", json={}, headers=world.auth("boss"))
    assert unknown.status_code == 404 and "verdict, hide, revoke" in unknown.text
    # The compare-and-set holds through the proxy: a stale `expected` writes nothing.
    boss = {**PAGE, **world.auth("boss")}
    assert dashboard.post("/dashboard/moderation/verdict", json=body, headers=boss).is_success
    stale = dashboard.post("/dashboard/moderation/verdict", json=body, headers=boss)
    assert stale.status_code == 409
    assert len(fronted.audit("verdict")) == 1
    assert dashboard.get("/dashboard/config.json").json()["moderation"] is True
