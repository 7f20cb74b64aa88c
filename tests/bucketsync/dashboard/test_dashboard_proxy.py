"""The dashboard's server half: the page and assets, the same-origin proxy that forces
`wait=0` (BS-13.40), the write allowlist, and `/v1/me` as the toggle hint (BS-11.11)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.dashboard.app import create_dashboard_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.settings import SettingsError
from agenthub.bucketsync.storage.local import LocalBucketStore
from tests.bucketsync.conftest import ORG, World, make_settings
from tests.bucketsync.live_support import LiveWorld, live

__all__ = ["live"]  # the fixture
from tests.support.servers import live_server

WRITE = {"X-Agenthub-Dashboard": "1"}


def test_the_page_and_its_assets_are_served_without_a_build_step(world: World) -> None:
    page = world.client.get("/dashboard")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/dashboard/assets/app.js">' in page.text
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "connect-src 'self'" in csp
    assets = [("app.js", "text/javascript"), ("chart.js", "text/javascript")]
    for name, kind in [*assets, ("style.css", "text/css")]:
        asset = world.client.get(f"/dashboard/assets/{name}")
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind)
    assert world.client.get("/dashboard/assets/routes.py").status_code == 404
    assert world.client.get("/dashboard/assets/missing.js").status_code == 404


def test_bs_13_40_the_page_polls_every_30_s(world: World) -> None:
    config = world.client.get("/dashboard/config.json").json()
    assert config == {
        "poll_s": 30.0,
        "oauth_login": None,
        "oauth_user": None,
        "title": None,
        "tagline": None,
        "score_decimals": 4,  # the challenge's scoring.decimals
        "moderation": True,  # served in-process: org admins moderate from the page
    }


def test_bs_13_40_the_proxy_forces_wait_0_and_leaves_no_presence(live: LiveWorld) -> None:
    live.agent("alpha")
    parks = live.registry.counters.parks
    # With the hand-moved timer a real wait=55 would park until the test moves time.
    future = live.pool.submit(live.client.get, "/dashboard/api/v1/inbox/alpha?wait=55")
    response = future.result(timeout=5)
    assert response.status_code == 200, response.text
    assert response.json()["items"] == []
    assert live.registry.counters.parks == parks  # never parked
    assert live.client.get("/v1/watching").json()["watching"] == {}  # no presence dot


def test_bs_13_40_presence_comes_from_v1_watching_through_the_proxy(live: LiveWorld) -> None:
    live.agent("alpha")
    waiting = live.park("/v1/inbox/alpha?wait=30")
    watching = live.client.get("/dashboard/api/v1/watching").json()
    assert watching["watching"]["alpha"]["stream"] == "inbox"
    assert watching["watching"]["alpha"]["waiters"] == 1
    live.timer.advance(31)
    assert waiting.result(timeout=5).status_code == 200


def test_the_proxy_passes_queries_statuses_and_error_bodies_through(world: World) -> None:
    world.agent("alpha")
    assert world.raw("alpha", "tokenizer notes").status_code == 201
    assert world.raw("alpha", "other").status_code == 201
    found = world.client.get("/dashboard/api/v1/messages", params={"q": "tokenizer"}).json()
    assert found["matched"] == 1
    missing = world.client.get("/dashboard/api/v1/agents/nobody")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "NOT_REGISTERED"
    assert world.client.get("/dashboard/api/v1").json()["service"] == "bucket-sync"


@pytest.mark.parametrize("path", ["messages/.hidden", "agents/a b", "inbox/%00x"])
def test_the_proxy_rejects_paths_that_are_not_plain_components(world: World, path: str) -> None:
    response = world.client.get(f"/dashboard/api/v1/{path}")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_PATH"


@pytest.mark.parametrize("path", ["agents/register", "results", "traces", "jobs:run"])
def test_the_proxy_lets_only_the_dashboards_writes_through(world: World, path: str) -> None:
    world.user("carol")
    response = world.client.post(
        f"/dashboard/api/v1/{path}", json={}, headers={**world.auth("carol"), **WRITE}
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "FORBIDDEN"
    assert "hint" in response.json()["error"]


def test_a_human_posts_through_the_proxy_as_human_name(world: World) -> None:
    world.agent("alpha")
    world.user("carol")
    response = world.client.post(
        "/dashboard/api/v1/messages",
        json={"agent_id": "human-carol", "body": "hello @alpha"},
        headers=world.auth("carol"),
    )
    assert response.status_code == 201, response.text
    assert response.json()["mentions_delivered"] == ["alpha"]
    inbox = world.client.get("/v1/inbox/alpha", params={"expand": "true"}).json()
    assert inbox["items"][0]["agent"] == "human-carol"


def test_the_audit_trail_records_the_browser_not_the_proxy(world: World) -> None:
    world.user("carol")
    response = world.client.post(
        "/dashboard/api/v1/messages",
        json={"agent_id": "human-carol", "body": "audited"},
        headers={**world.auth("carol"), "User-Agent": "phone-browser/1"},
    )
    assert response.status_code == 201, response.text
    data = world.hub.store.read(world.hub.settings.audit_bucket, world.hub.audit.path_for_now())
    row = [json.loads(line) for line in (data or b"").decode().splitlines()][-1]
    assert (row["caller_ip"], row["user_agent"]) == ("testclient", "phone-browser/1")


def test_bs_11_11_me_is_the_toggle_hint_and_the_server_still_checks(world: World) -> None:
    world.user("boss", role="admin")
    world.user("carol")
    boss = world.client.get("/dashboard/api/v1/me", headers=world.auth("boss")).json()
    carol = world.client.get("/dashboard/api/v1/me", headers=world.auth("carol")).json()
    assert (boss["handle"], boss["is_organizer"]) == ("human-boss", True)
    assert (carol["handle"], carol["is_organizer"]) == ("human-carol", False)
    # A participant who forges the toggle is refused by the post path itself.
    forged = world.client.post(
        "/dashboard/api/v1/messages",
        json={"agent_id": "human-carol", "body": "everyone stop", "broadcast": True},
        headers=world.auth("carol"),
    )
    assert forged.status_code == 403
    assert forged.json()["error"]["code"] == "NOT_ORGANIZER"
    assert world.client.get("/v1/messages").json()["count"] == 0


def test_a_write_with_neither_token_nor_dashboard_header_is_refused(world: World) -> None:
    response = world.client.post(
        "/dashboard/api/v1/messages", json={"agent_id": "human-x", "body": "hi"}
    )
    assert response.status_code == 403
    assert "x-agenthub-dashboard" in response.json()["error"]["hint"]


def test_dashboard_serve_proxies_to_any_bucket_sync_url(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data")
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(settings, store=LocalBucketStore(settings.data_dir), identity=identity)
    with live_server(app) as base:
        with httpx.Client(base_url=base, timeout=30) as client:
            World(client, app.state.hub, identity).agent("alpha")  # type: ignore[arg-type]
        with TestClient(create_dashboard_app(base)) as dash:
            assert dash.get("/dashboard").status_code == 200
            agents = dash.get("/dashboard/api/v1/agents").json()
            assert agents["items"] == ["alpha.md"]  # agent-collabs lists registration filenames
            inbox = dash.get("/dashboard/api/v1/inbox/alpha?wait=55")
            assert inbox.status_code == 200
        assert app.state.hub.longpoll.registry.counters.parks == 0


def test_dashboard_serve_reports_an_unreachable_upstream(tmp_path: Path) -> None:
    with live_server(create_dashboard_app("http://127.0.0.1:9")) as base:
        response = httpx.get(f"{base}/dashboard/api/v1/leaderboard", timeout=30)
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "UPSTREAM_UNAVAILABLE"


def test_dashboard_serve_needs_an_http_url() -> None:
    with pytest.raises(SettingsError, match="not an http"):
        create_dashboard_app("ftp://example.org")


def test_agenthub_dashboard_serve_refuses_a_bad_upstream_with_a_hint() -> None:
    from typer.testing import CliRunner

    from agenthub.cli import app

    result = CliRunner().invoke(app, ["dashboard", "serve", "ftp://example.org"])
    assert result.exit_code == 2
    assert "not an http(s) URL, e.g. http://host:8300" in result.output
    assert "hint: " in result.output and "Traceback" not in result.output
