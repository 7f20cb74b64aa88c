"""The private split: scored by the evaluator for every result, kept in the audit bucket,
absent from every route an agent can read (each GET of the app's OpenAPI, the downloads,
the board, events and the central bucket's files) until the reveal, then the final
leaderboard ranks on it."""

from __future__ import annotations

import re
from typing import Any

from agenthub.bucketsync.phases import private
from tests.bucketsync.phases.conftest import DEV_START, REVEAL, PhaseWorld

# Private scores no public number looks like, so any appearance is a leak.
PRIVATE = {"ada": [0.711111, 0.722222, 0.733333], "bob": [0.744444]}
PUBLIC = {"ada": [0.61, 0.62, 0.63], "bob": [0.64]}
NEEDLES = [str(v) for values in PRIVATE.values() for v in values]


def seeded(world: PhaseWorld) -> dict[str, list[str]]:
    world.agent("ada")
    world.agent("bob")
    world.at(DEV_START)
    made = {
        agent: [
            world.result(agent, pub, priv)
            for pub, priv in zip(PUBLIC[agent], PRIVATE[agent], strict=True)
        ]
        for agent in PUBLIC
    }
    outcomes = world.evaluate()
    assert set(outcomes.values()) == {"valid"}, outcomes
    return made


def route_values(filename: str) -> dict[str, str]:
    """A value for every path parameter of the app's GET routes."""
    return {
        "filename": filename,
        "agent_id": "ada",
        "handle": "ada",
        "name": "general",
        "agent": "ada",
        "session": "s1",
        "path": "x",
        "namespace": "acme-admin",
    }


def filled(path: str, values: dict[str, str]) -> str | None:
    """`path` with its parameters filled in, or None when one is unknown here."""
    names = re.findall(r"{([^}:]+)(?::[^}]*)?}", path)
    if any(name not in values for name in names):
        return None
    return re.sub(r"{([^}:]+)(?::[^}]*)?}", lambda m: values[m.group(1)], path)


def every_get(world: PhaseWorld, values: dict[str, str]) -> dict[str, str]:
    """Each GET route of the app's OpenAPI read as agent `ada` (several ways), URL -> body."""
    bodies: dict[str, str] = {}
    paths = world.client.get("/openapi.json").json()["paths"]
    queries = [
        {},
        {"as": "ada", "expand": "true"},
        {"as": "ada", "expand": "true", "limit": "200", "order": "asc"},
        {"format": "json"},
        {"format": "csv"},
        {"view": "pareto"},
        {"best_per_agent": "false", "verification": "pending,valid,invalid"},
    ]
    auth = world.auth("user-ada")
    for path, methods in paths.items():
        if "get" not in methods:
            continue
        url = filled(path, values)
        assert url is not None, f"no value for a parameter of {path}"
        for query in queries:
            response = world.client.get(url, params=query, headers=auth)
            bodies[f"{url}?{query}"] = response.text
    return bodies


def central_files(world: PhaseWorld) -> dict[str, bytes]:
    store = world.hub.store
    paths = [e.path for e in store.list(world.hub.central, "")]
    return store.read_many(world.hub.central, paths)


def test_private_scores_reach_no_route_until_the_reveal(phase_world: PhaseWorld) -> None:
    made = seeded(phase_world)
    values = route_values(made["ada"][0])
    stored = private.scores(phase_world.hub)
    assert sorted(stored.values()) == sorted(float(n) for n in NEEDLES)

    bodies = every_get(phase_world, values)
    for filename in [f for files in made.values() for f in files]:
        bodies[filename] = phase_world.client.get(f"/v1/results/{filename}").text

    leaks = {url: n for url, body in bodies.items() for n in NEEDLES if n in body}
    assert leaks == {}
    assert len(bodies) > 100  # the walk reached the app's routes, not an empty schema
    for path, data in central_files(phase_world).items():
        assert not any(n.encode() in data for n in NEEDLES), path
    final = phase_world.client.get("/v1/leaderboard/final").json()
    assert final["status"] == "sealed" and final["rows"] == []
    audit = "/local/buckets/acme-admin/chal-audit"
    as_ada = phase_world.auth("user-ada")
    for url in (f"{audit}/tree", f"{audit}/files/{private.path_of(made['bob'][0])}"):
        assert phase_world.client.get(url, headers=as_ada).status_code in (403, 404)


def test_the_walk_finds_a_private_score_shown_while_unsealed(phase_world: PhaseWorld) -> None:
    """The broken variant: the same results re-scored while the challenge has no private
    split announce their re-run numbers on the board, and the walk finds them there."""
    phases = phase_world.hub.settings.challenge_phases
    phase_world.hub.settings.challenge_phases = [
        p.model_copy(update={"split": "public"}) for p in phases
    ]
    made = seeded(phase_world)
    bodies = every_get(phase_world, route_values(made["ada"][0]))

    leaked = {url.split("?")[0] for url, body in bodies.items() if "0.744444" in body}
    assert "/v1/messages" in leaked and "/v1/inbox/ada" not in leaked  # bob's verdict post


def test_after_the_reveal_the_final_leaderboard_ranks_on_the_private_split(
    phase_world: PhaseWorld,
) -> None:
    made = seeded(phase_world)
    phase_world.at(REVEAL)

    final = phase_world.client.get("/v1/leaderboard/final").json()
    digest = phase_world.client.get("/v1/digest").json()

    assert final["status"] == "revealed"
    rows = [(r["rank"], r["agent"], r["score"], r["public_score"]) for r in final["rows"]]
    # ada's entries default to her two best public results (0.63 and 0.62): 0.733333 counts.
    assert rows == [(1, "bob", 0.744444, 0.64), (2, "ada", 0.733333, 0.63)]
    assert final["rows"][1]["entries"] == [made["ada"][2], made["ada"][1]]
    assert final["rows"][1]["selection"] == "best_public"
    assert digest["final_leaderboard"] == final["rows"]
    assert digest["phase"]["private_split"]["status"] == "revealed"


def test_marked_entries_replace_the_default_ones(phase_world: PhaseWorld) -> None:
    made = seeded(phase_world)
    assert phase_world.final("ada", made["ada"][0]).status_code == 200
    phase_world.at(REVEAL)

    rows: list[dict[str, Any]] = phase_world.client.get("/v1/leaderboard/final").json()["rows"]

    ada = next(r for r in rows if r["agent"] == "ada")
    assert (ada["score"], ada["entries"], ada["selection"]) == (
        0.711111,
        [made["ada"][0]],
        "marked",
    )


def test_an_agent_with_no_private_score_yet_is_listed_unscored(phase_world: PhaseWorld) -> None:
    phase_world.agent("cy")
    phase_world.at(DEV_START)
    filename = phase_world.result("cy", 0.9)
    phase_world.at(REVEAL)

    final = phase_world.client.get("/v1/leaderboard/final").json()

    assert final["rows"] == []
    assert final["unscored"] == [{"agent": "cy", "entries": [filename], "selection": "best_public"}]
