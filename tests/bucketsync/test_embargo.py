"""Staged disclosure (issue 32): with `RESULT_EMBARGO_HOURS`, a result's score is public at
once and its method, description, body and submission folder only from `reveal_at` on —
on every GET route of the API (walked from its OpenAPI document), for anyone but the
author and the organizers; after the injected clock passes `reveal_at`, for everyone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agenthub.bucketsync.settings import BucketSyncSettings
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import World, make_settings

SECRETS = ("SECRET-METHOD-7f3", "SECRET-DESC-9a1", "SECRET-BODY-c44", "hidden-sub")
HOURS = 2


@pytest.fixture
def settings(tmp_path: Path, request: pytest.FixtureRequest) -> BucketSyncSettings:
    hours = getattr(request, "param", HOURS)
    return make_settings(tmp_path / "data", RESULT_EMBARGO_HOURS=str(hours))


def setup(world: World) -> dict[str, str]:
    """agent-1 (alice) promotes a scored and a negative result; bob runs agent-2; olive
    organizes. Returns the names the route walk fills in."""
    world.agent("agent-1", "alice")
    world.agent("agent-2", "bob")
    world.user("olive", role="admin")
    assert world.put("agent-1", "hidden-sub/model.py", "print(1)").status_code == 201
    text = (
        "---\nscore: 0.9\nstatus: agent-run\n"
        f"method: {SECRETS[0]}\ndescription: {SECRETS[1]}\nartifacts: {SECRETS[3]}/\n"
        f"---\n{SECRETS[2]}\n"
    )
    assert world.put("agent-1", "results/r.md", text).status_code == 201
    promoted = world.client.post(
        "/v1/results", json={"source": world.uri("agent-1", "results/r.md")}
    )
    assert promoted.status_code == 201, promoted.text
    negative = (
        f"---\nscore: 0.1\nstatus: negative\nmethod: {SECRETS[0]} tried twice\n"
        f"description: {SECRETS[1]}\n---\n{SECRETS[2]}\n"
    )
    assert world.put("agent-1", "results/n.md", negative).status_code == 201
    second = world.client.post("/v1/results", json={"source": world.uri("agent-1", "results/n.md")})
    assert second.status_code == 201, second.text
    # agent-2 builds on it (the lineage route shows it) and claims the same idea.
    built = (
        "---\nscore: 0.5\nstatus: agent-run\nmethod: mine\ndescription: mine\n"
        f"builds_on: [{promoted.json()['filename']}]\n---\nok\n"
    )
    assert world.put("agent-2", "results/b.md", built).status_code == 201
    assert (
        world.client.post(
            "/v1/results", json={"source": world.uri("agent-2", "results/b.md")}
        ).status_code
        == 201
    )
    return {"filename": promoted.json()["filename"], "negative": second.json()["filename"]}


QUERIES: dict[str, list[dict[str, str]]] = {
    "/v1/results": [{}, {"expand": "true"}, {"q": SECRETS[0].lower(), "expand": "true"}],
    "/v1/leaderboard": [
        {},
        {"format": "csv"},
        {"format": "json"},
        {"view": "pareto"},
        {"best_per_agent": "false"},
    ],
    "/v1/digest": [
        {},
        {"as": "agent-2"},
        {"as": "agent-1"},
        {"as": "agent-2", "budget_tokens": "8000"},
    ],
    "/v1/updates": [{"as": "agent-1", "expand": "true"}, {"as": "agent-2", "expand": "true"}],
    "/v1/landscape": [{"expand": "true"}],
    "/v1/messages": [{"expand": "true"}],
    "/v1/inbox/{handle}": [{"expand": "true"}],
}


def reads(world: World, names: dict[str, str]) -> Iterator[tuple[str, dict[str, str]]]:
    """Every GET route of the API (not the /local bucket emulation: see below), with its
    path parameters filled in and the query variants that show results."""
    paths = world.client.get("/openapi.json").json()["paths"]
    values = {
        "filename": names["filename"],
        "name": names["filename"],
        "handle": "agent-1",
        "agent_id": "agent-1",
        "session": "s1",
        "path": "x",
    }
    for path, operations in sorted(paths.items()):
        if "get" not in operations or path.startswith("/local/"):
            continue
        concrete = path
        for key, value in values.items():
            concrete = concrete.replace("{" + key + "}", value)
        for query in QUERIES.get(path, [{}]):
            yield concrete, query
        if "{filename}" in path:
            yield path.replace("{filename}", names["negative"]), {}


def leaks(world: World, names: dict[str, str], headers: dict[str, str]) -> list[str]:
    """What each read shows of the secrets, directly and through the dashboard's proxy
    (which forwards the reader's Authorization)."""
    found = []
    for path, query in reads(world, names):
        for shown in (path, f"/dashboard/api{path}" if path.startswith("/v1") else None):
            if shown is None:
                continue
            response = world.client.get(shown, params=query, headers=headers)
            assert response.status_code < 500, (shown, response.text)
            hit = [s for s in SECRETS if s.lower() in response.text.lower()]
            if hit:
                found.append(f"{shown}?{query}: {hit}")
    return found


def test_no_route_shows_the_withheld_method_to_others_until_reveal_at(
    world: World, clock: FrozenClock
) -> None:
    names = setup(world)
    assert leaks(world, names, {}) == []
    assert leaks(world, names, world.auth("bob")) == []
    clock.advance(HOURS * 3600 - 1)
    assert leaks(world, names, world.auth("bob")) == []
    clock.advance(1)
    revealed = leaks(world, names, {})
    assert any(line.startswith(f"/v1/results/{names['filename']}") for line in revealed)
    assert any(line.startswith("/v1/leaderboard") for line in revealed)
    assert any(line.startswith("/dashboard/api/v1/leaderboard") for line in revealed)


def test_the_walk_finds_the_method_where_nothing_is_withheld(world: World) -> None:
    """The broken variant: with the embargo off the same walk sees the method (so the
    walk above can fail)."""
    world.hub.settings.result_embargo_hours = 0
    names = setup(world)
    found = leaks(world, names, world.auth("bob"))
    for route in (
        "/v1/results?",
        f"/v1/results/{names['filename']}",
        "/v1/leaderboard?",
        "/v1/digest?",
    ):
        assert any(line.startswith(route) for line in found), route


def test_the_score_is_public_at_once_with_reveal_at(world: World) -> None:
    names = setup(world)
    rows = world.client.get("/v1/leaderboard").json()["rows"]
    mine = next(r for r in rows if r["filename"] == names["filename"])
    assert mine["score"] == 0.9 and mine["method"] is None and mine["pin"] is None
    assert mine["reveal_at"] == "2026-03-01T14:00:00Z"
    shown = world.client.get(f"/v1/results/{names['filename']}").json()
    assert shown["frontmatter"]["score"] == 0.9
    assert "method" not in shown["frontmatter"] and "artifacts" not in shown["frontmatter"]
    assert shown["body"] == "" and shown["withheld"][:2] == ["method", "description"]


@pytest.mark.parametrize("user", ["alice", "olive"])
def test_the_author_and_organizers_see_it_at_once(world: World, user: str) -> None:
    names = setup(world)
    shown = world.client.get(f"/v1/results/{names['filename']}", headers=world.auth(user)).json()
    assert shown["frontmatter"]["method"] == SECRETS[0]
    assert SECRETS[2] in shown["body"] and shown["withheld"] == []
    rows = world.client.get("/v1/leaderboard", headers=world.auth(user)).json()["rows"]
    assert next(r for r in rows if r["filename"] == names["filename"])["method"] == SECRETS[0]


def test_a_claim_is_not_told_of_a_withheld_negative_result(
    world: World, clock: FrozenClock
) -> None:
    setup(world)

    def claim(path: str) -> Any:
        text = f"---\nidea: {SECRETS[0]} tried twice\n---\n{path}\n"
        assert world.put("agent-2", path, text).status_code == 201
        response = world.client.post("/v1/claims", json={"source": world.uri("agent-2", path)})
        assert response.status_code == 201, response.text
        return response.json()["near_duplicates"]

    assert claim("claims/c1.md") == []
    clock.advance(HOURS * 3600 + 1)
    assert [m["kind"] for m in claim("claims/c2.md")] == ["negative-result"]


@pytest.mark.parametrize("settings", [0], indirect=True)
def test_without_an_embargo_results_carry_no_disclosure_keys(world: World) -> None:
    names = setup(world)
    shown = world.client.get(f"/v1/results/{names['filename']}").json()
    assert "reveal_at" not in shown and shown["frontmatter"]["method"] == SECRETS[0]
