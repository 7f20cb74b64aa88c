"""Organizer moderation over HTTP (issue 28, item 7): a verdict through the index's
compare-and-set, hiding a post, revoking a user — each audited, each refused to a
non-admin, to nobody signed in, and to a cookie-style write without the page's header."""

from __future__ import annotations

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
from tests.bucketsync.dashboard.test_dashboard_browser import post_result
from tests.support.servers import live_server

PAGE = {"X-Agenthub-Dashboard": "1"}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    settings = make_settings(tmp_path / "data", LISTING_TTL_S="0")
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(settings, store=LocalBucketStore(settings.data_dir), identity=identity)
    with live_server(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        world = World(client, app.state.hub, identity)  # type: ignore[arg-type]
        world.user("boss", role="admin")
        world.user("carol", role="contributor")
        world.agent("alpha")
        post_result(world, "alpha", "r/1.md", 0.5)
        assert world.raw("alpha", "a post to hide").status_code == 201
        yield world


def audit_rows(world: World) -> list[dict[str, Any]]:
    month = f"{world.hub.clock.now():%Y%m}"
    return [r for r in world.hub.audit.rows(month) if r["route"].startswith("/dashboard/")]


def result_of(world: World) -> str:
    name: str = world.client.get("/v1/results").json()["items"][0]
    return name


def test_a_verdict_is_compare_and_set_reaches_the_board_and_is_audited(world: World) -> None:
    name = result_of(world)
    body = {"filename": name, "verdict": "invalid", "expected": "pending"}
    made = world.client.post("/dashboard/moderation/verdict", json=body, headers=world.auth("boss"))
    assert made.status_code == 200, made.text
    assert made.json() == {"filename": name, "verification": "invalid", "previous": "pending"}
    index = json.loads(
        world.hub.store.read(world.hub.central, "results/verification_status.json") or b"{}"
    )
    assert index[name] == "invalid"
    assert world.client.get("/v1/leaderboard").json()["rows"] == []  # invalid leaves the board

    # The same request again saw `pending`: the index says `invalid` now, nothing is written.
    again = world.client.post(
        "/dashboard/moderation/verdict", json=body, headers=world.auth("boss")
    )
    assert again.status_code == 409 and "invalid now" in again.json()["error"]["message"]
    back = {"filename": name, "verdict": "valid", "expected": "invalid"}
    assert (
        world.client.post(
            "/dashboard/moderation/verdict", json=back, headers=world.auth("boss")
        ).json()["verification"]
        == "valid"
    )

    rows = audit_rows(world)
    assert [
        (r["action"], r["result"], r["verdict"], r["previous"], r["agent_id"]) for r in rows
    ] == [
        ("verdict", name, "invalid", "pending", "human-boss"),
        ("verdict", name, "valid", "invalid", "human-boss"),
    ]


def test_a_hidden_post_is_listed_for_the_page_and_audited(world: World) -> None:
    post = world.client.get("/v1/messages").json()["items"][0]
    body = {"filename": post, "hidden": True, "reason": "spam"}
    made = world.client.post("/dashboard/moderation/hide", json=body, headers=world.auth("boss"))
    assert made.status_code == 200, made.text
    assert world.client.get("/dashboard/moderation/hidden").json() == {"hidden": [post]}
    # The seed's board API has no hiding: /v1 still serves the post.
    assert post in world.client.get("/v1/messages").json()["items"]
    shown = {"filename": post, "hidden": False}
    world.client.post("/dashboard/moderation/hide", json=shown, headers=world.auth("boss"))
    assert world.client.get("/dashboard/moderation/hidden").json() == {"hidden": []}
    assert [(r["action"], r["post"]) for r in audit_rows(world)] == [
        ("hide", post),
        ("unhide", post),
    ]


def test_a_revoked_user_is_no_member_and_the_revocation_is_audited(world: World) -> None:
    assert world.client.get("/v1/me", headers=world.auth("carol")).json()["is_member"]
    made = world.client.post(
        "/dashboard/moderation/revoke", json={"user": "carol"}, headers=world.auth("boss")
    )
    assert made.status_code == 200, made.text
    assert made.json()["previous_role"] == "contributor"
    me = world.client.get("/v1/me", headers=world.auth("carol")).json()
    assert me["is_member"] is False
    row = audit_rows(world)[-1]
    assert (row["action"], row["user"], row["agent_id"]) == ("revoke", "carol", "human-boss")
    missing = world.client.post(
        "/dashboard/moderation/revoke", json={"user": "nobody"}, headers=world.auth("boss")
    )
    assert missing.status_code == 404 and "carol" in missing.json()["error"]["hint"]


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("verdict", {"verdict": "invalid", "expected": "pending"}),
        ("hide", {"hidden": True}),
        ("revoke", {"user": "boss"}),
    ],
)
def test_moderation_is_refused_to_all_but_an_org_admin(
    world: World, route: str, body: dict[str, Any]
) -> None:
    target = {
        "verdict": result_of(world),
        "hide": world.client.get("/v1/messages").json()["items"][0],
    }
    full = {**body, **({"filename": target[route]} if route in target else {})}
    url = f"/dashboard/moderation/{route}"
    contributor = world.client.post(url, json=full, headers=world.auth("carol"))
    assert contributor.status_code == 403, contributor.text
    assert "org admins" in contributor.json()["error"]["message"]
    anonymous = world.client.post(url, json=full, headers=PAGE)
    assert anonymous.status_code == 401
    cookie_style = world.client.post(url, json=full)  # no token and no page header
    assert cookie_style.status_code == 403
    assert "X-Agenthub-Dashboard".lower() in cookie_style.json()["error"]["hint"]
    assert audit_rows(world) == []
    index = world.hub.store.read(world.hub.central, "results/verification_status.json")
    assert json.loads(index or b"{}").get(target["verdict"], "pending") == "pending"
    assert world.client.get("/dashboard/moderation/hidden").json() == {"hidden": []}
    assert world.client.get("/v1/me", headers=world.auth("boss")).json()["is_organizer"]
