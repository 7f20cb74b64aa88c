"""Lineage (issue 32): a result's `builds_on` is checked at promotion (every reference
exists, no self-reference, no cycle), the graph is served by `GET /v1/lineage/{name}`,
credit counts reach the leaderboard and the digest, and the author built on hears of it."""

from __future__ import annotations

from typing import Any

import pytest

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.live import budget
from agenthub.bucketsync.results import lineage
from agenthub.bucketsync.storage.base import Batch
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import World


def result_text(score: float, builds_on: list[str] | None = None, **extra: str) -> str:
    fm = {"score": score, "method": "m", "status": "agent-run", "description": "d", **extra}
    lines = "".join(f"{k}: {v}\n" for k, v in fm.items())
    if builds_on is not None:
        lines += "builds_on:\n" + "".join(f"  - {ref}\n" for ref in builds_on)
    return f"---\n{lines}---\nnotes\n"


def promote(world: World, agent: str, score: float, builds_on: list[str] | None = None) -> Any:
    path = f"results/r-{score}.md"
    assert world.put(agent, path, result_text(score, builds_on)).status_code == 201
    return world.client.post("/v1/results", json={"source": world.uri(agent, path)})


def promoted(world: World, agent: str, score: float, builds_on: list[str] | None = None) -> str:
    response = promote(world, agent, score, builds_on)
    assert response.status_code == 201, response.text
    filename: str = response.json()["filename"]
    return filename


def next_filename(world: World, clock: FrozenClock, agent: str) -> str:
    """The filename the next promotion of `agent` will get (the stamp is the clock's)."""
    clock.advance(1)
    return naming.message_filename(naming.stamp(clock.now()), agent)


def test_references_to_missing_works_are_all_reported_in_one_400(world: World) -> None:
    world.agent("agent-1")
    response = promote(
        world,
        "agent-1",
        0.5,
        [
            "20260101-000000-000_agent-2.md",
            "artifacts/v1_agent-2/model.py",
            "shared_resources/data_agent-2.csv",
            "notes/elsewhere.md",
        ],
    )
    assert response.status_code == 400
    problems = response.json()["error"]["problems"]
    assert [p["field"] for p in problems] == ["builds_on"] * 4
    assert "does not exist" in problems[0]["message"]
    assert "GET /v1/results" in problems[0]["hint"]
    assert "names no result" in problems[3]["message"]
    assert world.client.get("/v1/results").json()["count"] == 0


def test_references_to_existing_results_messages_artifacts_and_resources_are_accepted(
    world: World,
) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    base = promoted(world, "agent-2", 0.4)
    post = world.raw("agent-2", "an idea")
    assert post.status_code == 201
    assert world.put("agent-2", "art/model.py", "print(1)").status_code == 201
    synced = world.client.post(
        "/v1/artifacts:sync", json={"source": world.uri("agent-2", "art/"), "dest_slug": "v1"}
    )
    assert synced.status_code == 200, synced.text
    refs = [
        base,
        f"message_board/{post.json()['filename']}",
        "artifacts/v1_agent-2/",
        f"hf://buckets/{world.hub.central}/artifacts/v1_agent-2/model.py",
    ]
    child = promoted(world, "agent-1", 0.5, refs)
    shown = world.client.get(f"/v1/lineage/{child}").json()
    kinds = {a["name"]: a["kind"] for a in shown["ancestors"]}
    assert kinds == {
        base: "result",
        post.json()["filename"]: "message",
        "artifacts/v1_agent-2": "artifact",
        "artifacts/v1_agent-2/model.py": "artifact",
    }


def test_a_result_naming_itself_is_refused(world: World, clock: FrozenClock) -> None:
    world.agent("agent-1")
    own = next_filename(world, clock, "agent-1")
    response = promote(world, "agent-1", 0.5, [own])
    assert response.status_code == 400, response.text
    assert "this result itself" in response.json()["error"]["message"]
    assert world.client.get("/v1/results").json()["count"] == 0
    # The refused stamp holds no stream back (it was settled, not left to its lease).
    assert world.hub.stamps.mark() > naming.parse_stamped_filename(own)[0]  # type: ignore[index]


def test_a_result_closing_a_cycle_is_refused(world: World, clock: FrozenClock) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    future = next_filename(world, clock, "agent-1")
    # An organizer's out-of-band edit: a stored result naming a filename not written yet.
    clock.advance(-0.5)
    stamp = naming.stamp(clock.now())
    edited = f"{stamp}_agent-2.md"
    world.hub.write_central(
        [(f"results/{edited}", result_text(0.3, [f"results/{future}"]).encode())]
    )
    clock.advance(0.5)
    response = promote(world, "agent-1", 0.5, [edited])
    assert response.status_code == 400, response.text
    assert "cycle" in response.json()["error"]["message"]


def test_the_cycle_check_is_what_refuses_it(
    world: World, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broken variant: without the ancestor walk the cycle above is stored."""
    world.agent("agent-1")
    world.agent("agent-2")
    future = next_filename(world, clock, "agent-1")
    clock.advance(-0.5)
    edited = f"{naming.stamp(clock.now())}_agent-2.md"
    world.hub.write_central(
        [(f"results/{edited}", result_text(0.3, [f"results/{future}"]).encode())]
    )
    clock.advance(0.5)
    with monkeypatch.context() as patched:
        patched.setattr(lineage.Graph, "ancestors_of", lambda *_a, **_k: {})
        assert promote(world, "agent-1", 0.5, [edited]).status_code == 201
    # Stored, the cycle is walked without looping forever.
    shown = world.client.get(f"/v1/lineage/{future}").json()
    assert {a["name"] for a in shown["ancestors"]} == {edited, future}


def test_credit_counts_others_building_on_you_not_yourself(world: World) -> None:
    for agent in ("agent-1", "agent-2", "agent-3"):
        world.agent(agent)
    base = promoted(world, "agent-1", 0.4)
    promoted(world, "agent-1", 0.41, [base])  # a self-build earns nothing
    promoted(world, "agent-2", 0.45, [base])
    promoted(world, "agent-3", 0.46, [base])
    promoted(world, "agent-3", 0.47, [base])
    credits = world.client.get("/v1/leaderboard").json()["credits"]
    assert credits["agent-1"] == {"credit": 3, "built_on_by": 2}
    assert credits["agent-2"] == {"credit": 0, "built_on_by": 0}
    digest = world.client.get("/v1/digest").json()["lineage"]
    assert digest["credits"] == [{"agent": "agent-1", "credit": 3, "built_on_by": 2}]
    assert digest["results_building_on_others"] == 3


def test_lineage_route_gives_ancestors_and_descendants_bounded(world: World) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    chain = [promoted(world, "agent-1", 0.1)]
    for step in range(1, 5):
        chain.append(promoted(world, f"agent-{1 + step % 2}", 0.1 + step / 10, [chain[-1]]))
    middle = chain[2]
    shown = world.client.get(f"/v1/lineage/{middle}").json()
    assert shown["node"]["name"] == middle and shown["node"]["agent"] == "agent-1"
    assert [(a["name"], a["depth"]) for a in shown["ancestors"]] == [(chain[1], 1), (chain[0], 2)]
    assert [(d["name"], d["depth"]) for d in shown["descendants"]] == [
        (chain[3], 1),
        (chain[4], 2),
    ]
    assert [chain[3], middle] in shown["edges"]
    near = world.client.get(f"/v1/lineage/{chain[-1]}", params={"depth": "2", "limit": "1"})
    body = near.json()
    assert [a["name"] for a in body["ancestors"]] == [chain[3]]
    assert body["truncated"] == {"ancestors": True, "descendants": False}
    assert body["ancestors"][0]["score"] == 0.4


def test_lineage_route_refuses_unknown_names_and_bad_bounds(world: World) -> None:
    world.agent("agent-1")
    base = promoted(world, "agent-1", 0.4)
    missing = world.client.get("/v1/lineage/20260101-000000-000_agent-9.md")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "NOT_FOUND"
    bad = world.client.get(f"/v1/lineage/{base}", params={"depth": "99"})
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "INVALID_QUERY"


def test_an_author_built_on_gets_a_landscape_event(world: World) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    base = promoted(world, "agent-1", 0.9)
    child = promoted(world, "agent-2", 0.5, [base])
    page = world.client.get(
        "/v1/landscape", params={"as": "agent-1", "kind": "lineage:built-on", "expand": "true"}
    ).json()
    assert page["matched"] == 1
    event = page["items"][0]
    assert event["reasons"] == ["lineage:built-on"]
    assert event["frontmatter"]["result"] == child
    assert event["frontmatter"]["built_on"] == {"agent-1": [base]}
    # A self-build tells nobody.
    promoted(world, "agent-2", 0.6, [child])
    again = world.client.get(
        "/v1/landscape", params={"as": "agent-2", "kind": "lineage:built-on"}
    ).json()
    assert again["matched"] == 0


def test_an_edited_or_removed_result_moves_its_credit(world: World) -> None:
    """The graph follows the stored results across listing versions (an organizer's edit,
    a deletion), and agrees with one built from scratch."""
    for agent in ("agent-1", "agent-2", "agent-3"):
        world.agent(agent)
    one = promoted(world, "agent-1", 0.4)
    two = promoted(world, "agent-2", 0.5)
    child = promoted(world, "agent-3", 0.6, [one])
    assert lineage.credit_of(world.hub, "agent-1")["credit"] == 1
    edited = result_text(0.6, [two]).encode()
    world.hub.write_central([(f"results/{child}", edited)])
    assert lineage.credit_of(world.hub, "agent-1")["credit"] == 0
    assert lineage.credit_of(world.hub, "agent-2")["credit"] == 1
    fresh = lineage.Graph().current(world.hub)
    kept = lineage.graph_of(world.hub)
    assert (fresh.credit, fresh.out) == (kept.credit, kept.out)
    world.hub.store.write_batch(world.hub.central, Batch(deletes=[f"results/{child}"]))
    world.hub.read_model.delete_through("results/", f"results/{child}")
    assert lineage.credit_of(world.hub, "agent-2")["credit"] == 0
    assert world.client.get(f"/v1/lineage/{two}").json()["descendants"] == []


def test_the_budgeted_digest_carries_lineage_below_every_section(world: World) -> None:
    for agent in ("agent-1", "agent-2", "agent-3", "agent-4"):
        world.agent(agent)
    first = promoted(world, "agent-1", 0.4)
    second = promoted(world, "agent-2", 0.42, [first])
    promoted(world, "agent-3", 0.45, [first])
    promoted(world, "agent-4", 0.46, [second])
    plain = world.client.get("/v1/digest").json()["lineage"]
    assert [c["agent"] for c in plain["credits"]] == ["agent-1", "agent-2"]

    def budgeted(tokens: int) -> dict[str, Any]:
        answer = world.client.get("/v1/digest", params={"as": "agent-1", "budget_tokens": tokens})
        assert answer.status_code == 200, answer.text
        assert len(answer.content) <= tokens * budget.BYTES_PER_TOKEN
        body: dict[str, Any] = answer.json()
        return body

    roomy = budgeted(40_000)
    assert roomy["lineage"] == plain and roomy["omitted"]["lineage"] == 0
    floor = world.client.get("/v1/digest", params={"budget_tokens": 1, "as": "agent-1"})
    shown_counts = set()
    for tokens in range(floor.json()["error"]["minimum_tokens"], roomy["budget"]["used"] + 1):
        body = budgeted(tokens)
        credits = body["lineage"]["credits"]
        assert credits == plain["credits"][: len(credits)], tokens
        assert len(credits) + body["omitted"]["lineage"] == len(plain["credits"]), tokens
        assert body["lineage"]["results_building_on_others"] == 3
        if credits:  # below every section: shown only when nothing above was left out
            assert not any(body["omitted"][name] for name in budget.NAMES), tokens
        shown_counts.add(len(credits))
    assert shown_counts == {0, 1, 2}
