"""The dashboard in a real browser against a live bucket-sync on the local store, seeded
with agents, results, messages and a channel (issue 9; BS-11.11, BS-13.40).

Screenshots of every page land in the test's temp dir (`shots/`)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import pytest

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.local import LocalBucketStore
from tests.bucketsync.conftest import ORG, World, make_settings
from tests.bucketsync.dashboard.browser import chromium
from tests.support.servers import live_server

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1200, "height": 900}
TIMEOUT_MS = 10_000


@dataclass
class Site:
    base: str
    world: World
    shots: Path
    browser: Any

    def page(self, viewport: dict[str, int] = DESKTOP) -> Any:
        context = self.browser.new_context(viewport=viewport, base_url=self.base)
        context.set_default_timeout(TIMEOUT_MS)
        return context.new_page()

    def shot(self, page: Any, name: str) -> Path:
        path = self.shots / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path


def post_result(world: World, agent: str, path: str, score: float, **extra: Any) -> None:
    fm = {"score": score, "method": "greedy", "status": "agent-run", "description": "run", **extra}
    text = "---\n" + "".join(f"{k}: {json.dumps(v)}\n" for k, v in fm.items()) + "---\nnotes\n"
    assert world.put(agent, path, text).status_code == 201
    response = world.client.post("/v1/results", json={"source": world.uri(agent, path)})
    assert response.status_code == 201, response.text


SESSION = "0f0e0d0c-1111-4222-8333-444455556666"


def share_trace(world: World, agent: str, session: str, tokens: dict[str, int], log: bool) -> None:
    fm: dict[str, Any] = {
        "schema_version": 1,
        "harness": "claude-code",
        "session_id": session,
        "tokens": tokens,
        "tool_calls": 7,
    }
    if log:
        fm["native_log_file"] = f"{session}.jsonl"
        assert (
            world.put(agent, f"traces/{session}/{session}.jsonl", b'{"type":"user"}\n').status_code
            == 201
        )
    text = "---\n" + json.dumps(fm) + "\n---\nsession summary\n"
    assert world.put(agent, f"traces/{session}/manifest.md", text).status_code == 201
    body = {"source": world.uri(agent, f"traces/{session}/"), "share": "full" if log else "stats"}
    response = world.client.post("/v1/traces", json=body)
    assert response.status_code == 201, response.text


def seed(world: World) -> None:
    for agent in ("alpha", "beta", "gamma"):
        world.agent(agent)
    post_result(world, "alpha", "r/1.md", 0.41)
    post_result(world, "beta", "r/1.md", 0.55)
    post_result(world, "alpha", "r/2.md", 0.72)
    post_result(world, "gamma", "r/1.md", 0.30)
    assert world.raw("beta", "found a faster tokenizer, see results @alpha").status_code == 201
    assert world.raw("gamma", "stuck on the eval harness").status_code == 201
    tokens = {"input": 1200, "output": 800, "cache_read": 5000, "cache_creation": 100}
    share_trace(world, "alpha", SESSION, tokens, log=True)
    share_trace(world, "beta", "b-session-1", {**tokens, "input": 300}, log=False)
    world.user("boss", role="admin")
    world.user("carol", role="contributor")
    made = world.client.post(
        "/v1/channels",
        json={"name": "eval", "agent_id": "human-boss", "body": "evaluation harness talk"},
        headers=world.auth("boss"),
    )
    assert made.status_code == 201, made.text
    # alpha watches its inbox (a short real long-poll): its presence dot is green.
    assert world.client.get("/v1/inbox/alpha", params={"wait": "0.2"}).status_code == 200


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("dashboard")
    settings = make_settings(root / "data")
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(settings, store=LocalBucketStore(settings.data_dir), identity=identity)
    with live_server(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        world = World(client, app.state.hub, identity)  # type: ignore[arg-type]
        seed(world)
        shots = root / "shots"
        shots.mkdir()
        yield Site(base, world, shots, browser)


def sign_in(page: Any, site: Site, user: str) -> None:
    page.goto("/dashboard")
    page.fill("input[name=token]", site.world.tokens[user])
    page.click("form.signin button[type=submit]")
    page.wait_for_selector(f"[data-testid=signed-in]:has-text('human-{user}')")


def test_leaderboard_renders_the_seeded_ranking_with_badges_and_chart(site: Site) -> None:
    page = site.page()
    page.goto("/dashboard")
    page.wait_for_selector("#leaderboard tbody tr")
    agents = page.locator("#leaderboard tbody tr td.agent").all_inner_texts()
    assert agents == ["alpha", "beta", "gamma"]  # best per agent, higher is better
    first = page.locator("#leaderboard tbody tr").first.inner_text()
    assert "0.72" in first and "pending" in first
    assert page.locator("#leaderboard .badge.v-pending").count() == 3
    # one best-so-far line per agent; alpha's steps up at its second, better result
    assert page.locator("figure.chart polyline").count() == 3
    alpha = page.locator("figure.chart circle[data-agent=alpha]")
    assert [alpha.nth(i).get_attribute("data-score") for i in range(alpha.count())] == [
        "0.41",
        "0.72",
    ]
    site.shot(page, "leaderboard")
    page.set_viewport_size(PHONE)
    site.shot(page, "leaderboard-phone")
    # nothing spills sideways at phone width: the page is no wider than the screen
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_board_search_channels_agents_and_stats_pages_read_the_api(site: Site) -> None:
    from playwright.sync_api import expect

    page = site.page()
    page.goto("/dashboard#/board")
    page.wait_for_selector("ol.messages[data-list=board] li")
    assert "stuck on the eval harness" in page.inner_text("ol.messages")
    page.fill("input[name=q]", "tokenizer")
    page.click("form.search button")
    # A locator assertion, not wait_for_function: the page's CSP forbids eval.
    expect(page.locator("ol.messages[data-list=board] li")).to_have_count(1)
    assert "faster tokenizer" in page.inner_text("ol.messages")
    site.shot(page, "board")

    page.goto("/dashboard#/channels")
    page.wait_for_selector("#channels tbody tr")
    page.click("a[href='#/channels/eval']")
    page.wait_for_selector("#members li")
    members = page.inner_text("#members")
    assert "human-boss" in members and "notify: mentions" in members
    site.shot(page, "channel")

    page.goto("/dashboard#/agents")
    page.wait_for_selector("#agents tbody tr")
    assert page.locator("tr[data-agent=alpha] .dot").get_attribute("data-presence") == "watching"
    assert page.locator("tr[data-agent=beta] .dot").get_attribute("data-presence") == "away"
    site.shot(page, "agents")

    page.goto("/dashboard#/stats")
    page.wait_for_selector("#stats")
    stats = page.inner_text("#stats")
    assert "reported floor" in page.inner_text("main")
    assert re.search(r"input tokens\s+1,500", stats), stats
    assert re.search(r"tool calls\s+14", stats), stats
    assert f"{SESSION}.jsonl" in page.inner_text("#traces")  # primary_log_file linked
    site.shot(page, "stats")

    page.goto("/dashboard#/inbox/alpha")
    page.wait_for_selector("ol.messages[data-list=inbox] li")
    assert "faster tokenizer" in page.inner_text("ol.messages")
    site.shot(page, "inbox")


def test_a_human_signs_in_and_posts_to_the_board_and_the_mentioned_inbox(site: Site) -> None:
    page = site.page(PHONE)
    sign_in(page, site, "carol")
    assert page.locator("#broadcast").count() == 0  # not an organizer: no toggle
    page.goto("/dashboard#/board")
    page.fill("textarea[name=body]", "great result @beta, can you share the config?")
    page.click("form.composer button[type=submit]")
    page.wait_for_selector(".notice.ok:has-text('delivered to beta')")
    page.wait_for_selector("ol.messages li:has-text('can you share the config')")
    assert "human-carol" in page.locator("ol.messages li").first.inner_text()
    site.shot(page, "posted-phone")

    inbox = site.world.client.get("/v1/inbox/beta", params={"expand": "true"}).json()
    newest = inbox["items"][0]
    assert (newest["agent"], newest["body"].strip()) == (
        "human-carol",
        "great result @beta, can you share the config?",
    )
    page.goto("/dashboard#/inbox/beta")
    page.wait_for_selector("ol.messages[data-list=inbox] li:has-text('share the config')")


def test_an_organizer_broadcast_reaches_an_agents_updates(site: Site) -> None:
    before = site.world.client.get("/v1/updates", params={"as": "gamma"}).json()["cursor"]
    page = site.page()
    sign_in(page, site, "boss")
    page.goto("/dashboard#/board")
    page.check("#broadcast")
    site.shot(page, "organizer-board")
    page.fill("textarea[name=body]", "Freeze at 18:00 UTC, final results by then")
    page.click("form.composer button[type=submit]")
    page.wait_for_selector(".notice.ok:has-text('broadcast to everyone')")

    updates = site.world.client.get(
        "/v1/updates", params={"as": "gamma", "after": before, "expand": "true"}
    ).json()
    bodies = [item["body"].strip() for item in updates["items"]]
    assert "Freeze at 18:00 UTC, final results by then" in bodies
    page.wait_for_selector("ol.messages li.broadcast:has-text('Freeze at 18:00')")


def test_an_organizer_creates_a_channel_and_a_participant_never_sees_the_controls(
    site: Site,
) -> None:
    page = site.page()
    sign_in(page, site, "boss")
    page.goto("/dashboard#/channels")
    page.fill("#create-channel input[name=channel]", "infra")
    page.fill("#create-channel input[name=theme]", "GPU queue and job quotas")
    page.click("#create-channel button")
    page.wait_for_selector("#channels a[href='#/channels/infra']")

    other = site.page()
    sign_in(other, site, "carol")
    for hash_ in ("#/board", "#/channels"):
        other.goto(f"/dashboard{hash_}")
        other.wait_for_selector("main h2")
        assert other.locator("#broadcast").count() == 0
        assert other.locator("#create-channel").count() == 0
    site.shot(other, "participant-channels")


def test_a_participant_posts_into_a_channel_from_its_page(site: Site) -> None:
    page = site.page()
    sign_in(page, site, "carol")
    page.goto("/dashboard#/channels/eval")
    page.wait_for_selector("#members li")
    page.fill("textarea[name=body]", "which eval split do we report?")
    page.click("form.composer button[type=submit]")
    page.wait_for_selector("ol.messages[data-list=channel] li:has-text('which eval split')")
    names = site.world.client.get("/v1/channels/eval/messages", params={"expand": "true"})
    assert [m["agent"] for m in names.json()["items"]][:1] == ["human-carol"]


def test_a_bad_token_is_refused_with_a_hint(site: Site) -> None:
    page = site.page()
    page.goto("/dashboard")
    page.fill("input[name=token]", "bst_not-a-real-token")
    page.click("form.signin button[type=submit]")
    notice = page.wait_for_selector(".notice.error")
    assert notice is not None
    assert re.search(r"not valid.*ask the organizer", notice.inner_text())
    assert page.locator("[data-testid=signed-in]").count() == 0


PUBLIC = "http://dashboard.test"


class ConsentingAuthServer:
    """A local authorization server that consents at once: its authorize URL is our own
    callback with a code that exchanges for a real local-identity token."""

    def __init__(self, identity: LocalIdentity) -> None:
        self.identity = identity
        self.codes: dict[str, str] = {}

    def authorize_url(self, *, state: str, redirect_uri: str) -> str:
        code = f"code-{len(self.codes)}"
        self.codes[code] = self.identity.add_user("dora", role="admin")
        return f"/dashboard/oauth/callback?{urlencode({'code': code, 'state': state})}"

    async def exchange(self, *, code: str, redirect_uri: str) -> str:
        assert redirect_uri == f"{PUBLIC}/dashboard/oauth/callback"
        return self.codes.pop(code)


def test_hf_mode_signs_in_through_oauth_and_posts(tmp_path: Path, browser: Any) -> None:
    settings = make_settings(
        tmp_path / "data",
        OAUTH_CLIENT_ID="client-1",
        OAUTH_CLIENT_SECRET="secret-1",
        DASHBOARD_PUBLIC_URL=PUBLIC,
    )
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(
        settings,
        store=LocalBucketStore(settings.data_dir),
        identity=identity,
        oauth_provider=ConsentingAuthServer(identity),
    )
    with live_server(app) as base:
        site = Site(base, None, tmp_path, browser)  # type: ignore[arg-type]
        page = site.page(PHONE)
        page.goto("/dashboard#/board")
        page.click("#hf-signin")
        page.wait_for_selector("[data-testid=signed-in]:has-text('human-dora')")
        assert page.url.endswith("/dashboard#/board")  # back where the sign-in started
        assert page.evaluate("sessionStorage.length") == 0  # no token in the page
        page.fill("textarea[name=body]", "hello from the Hub sign-in")
        page.click("form.composer button[type=submit]")
        page.wait_for_selector("ol.messages li:has-text('hello from the Hub sign-in')")
        site.shot(page, "oauth-signed-in-phone")
        page.click("text=Sign out")
        page.wait_for_selector("#hf-signin")


def test_the_page_polls_through_the_proxy_only(tmp_path: Path, browser: Any) -> None:
    settings = make_settings(tmp_path / "data", DASHBOARD_POLL_S="0.3")
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(settings, store=LocalBucketStore(settings.data_dir), identity=identity)
    with live_server(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        world = World(client, app.state.hub, identity)  # type: ignore[arg-type]
        world.agent("alpha")
        page = Site(base, world, tmp_path, browser).page()
        paths: list[str] = []
        page.on("request", lambda request: paths.append(urlsplit(request.url).path))
        page.goto("/dashboard#/board")
        page.wait_for_selector("main h2:has-text('Message board')")
        assert world.raw("alpha", "posted while the page was open").status_code == 201
        # no reload: the next poll shows it
        page.wait_for_selector("ol.messages li:has-text('posted while the page was open')")
        assert paths and all(p.startswith("/dashboard") for p in paths), paths
        assert any(p == "/dashboard/api/v1/messages" for p in paths)
    assert app.state.hub.longpoll.registry.counters.parks == 0
