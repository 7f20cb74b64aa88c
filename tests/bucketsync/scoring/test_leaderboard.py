"""The leaderboard (BS-7.27-7.34), the digest's scoring parts (BS-7.35, 7.36) and the
verification index as the one interface to verdicts (BS-1.18, 4.60, 9.3)."""

from __future__ import annotations

import itertools
import json
from typing import Any

from agenthub.bucketsync.results.leaderboard import Entry, rank
from agenthub.bucketsync.storage.base import Batch
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import World

INDEX = "results/verification_status.json"


_serial = itertools.count()


def post_result(world: World, agent: str, score: Any, **extra: Any) -> str:
    fm = {"score": score, "method": "m", "status": "agent-run", "description": "d", **extra}
    lines = "".join(f"{k}: {json.dumps(v)}\n" for k, v in fm.items())
    n = next(_serial)
    path = f"results/r{n}.md"
    assert world.put(agent, path, f"---\n{lines}---\nrun {n}\n").status_code == 201
    response = world.client.post("/v1/results", json={"source": world.uri(agent, path)})
    assert response.status_code == 201, response.text
    return str(response.json()["filename"])


def set_index(world: World, clock: FrozenClock, verdicts: dict[str, str]) -> None:
    """An admin edits the index out of band; the Space sees it after the listing TTL."""
    world.hub.store.write_batch(
        world.hub.central, Batch(adds=[(INDEX, json.dumps(verdicts).encode())])
    )
    clock.advance(world.hub.settings.listing_ttl_s + 1)


def board(world: World, **params: str) -> dict[str, Any]:
    response = world.client.get("/v1/leaderboard", params=params)
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_bs_7_27_the_ranking_is_a_pure_function_of_results_and_index() -> None:
    entries = [
        Entry(
            "20260301-120000-000_a.md",
            "a",
            "20260301-120000-000",
            {"score": 2, "status": "agent-run"},
        ),
        Entry(
            "20260301-120001-000_b.md",
            "b",
            "20260301-120001-000",
            {"score": 3, "status": "agent-run"},
        ),
    ]
    first = rank(entries, {}, score_field="score", order="desc")
    again = rank(list(reversed(entries)), {}, score_field="score", order="desc")
    assert first == again
    assert [row.agent for row in first.rows] == ["b", "a"]
    flipped = rank(
        entries, {"20260301-120001-000_b.md": "invalid"}, score_field="score", order="desc"
    )
    assert [row.agent for row in flipped.rows] == ["a"]


def test_bs_7_28_eligibility_and_excluded_counts(world: World, clock: FrozenClock) -> None:
    world.agent("agent-1")
    post_result(world, "agent-1", 0.5)
    post_result(world, "agent-1", 0.9, status="negative")
    world.hub.store.write_batch(
        world.hub.central,
        Batch(
            adds=[
                (
                    "results/20260101-000000-000_agent-1.md",
                    b"---\nscore: high\nstatus: agent-run\n---\n",
                ),
                ("results/20260101-000001-000_agent-1.md", b"not frontmatter at all"),
            ]
        ),
    )
    clock.advance(31)
    body = board(world)
    assert [row["score"] for row in body["rows"]] == [0.5]
    assert body["meta"]["results_considered"] == 4
    assert body["meta"]["excluded"]["status_negative"] == 1
    assert body["meta"]["excluded"]["malformed"] == 2


def test_bs_7_29_score_order_asc_ranks_lower_first(world: World) -> None:
    world.hub.settings.score_order = "asc"
    world.agent("agent-1")
    world.agent("agent-2")
    post_result(world, "agent-1", 3.5)
    post_result(world, "agent-2", 1.25)
    body = board(world)
    assert body["order"] == "asc"
    assert [(row["rank"], row["agent"]) for row in body["rows"]] == [(1, "agent-2"), (2, "agent-1")]


def test_bs_7_30_invalid_hidden_pending_flagged_and_strict_board(
    world: World, clock: FrozenClock
) -> None:
    for agent in ("agent-1", "agent-2", "agent-3"):
        world.agent(agent)
    good = post_result(world, "agent-1", 0.7)
    bad = post_result(world, "agent-2", 0.9)
    pending = post_result(world, "agent-3", 0.8)
    set_index(world, clock, {good: "valid", bad: "invalid"})
    default = board(world)
    assert [(r["agent"], r["verification"]) for r in default["rows"]] == [
        ("agent-3", "pending"),
        ("agent-1", "valid"),
    ]
    assert default["meta"]["excluded"]["verification_invalid"] == 1
    strict = board(world, verification="valid")
    assert [r["filename"] for r in strict["rows"]] == [good]
    both = board(world, verification="valid,invalid")
    assert [r["filename"] for r in both["rows"]] == [bad, good]
    assert pending not in [r["filename"] for r in strict["rows"]]
    wrong = world.client.get("/v1/leaderboard", params={"verification": "maybe"})
    assert wrong.status_code == 400 and wrong.json()["error"]["code"] == "INVALID_QUERY"


def test_bs_7_31_best_per_agent_by_default(world: World) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    post_result(world, "agent-1", 0.6)
    post_result(world, "agent-1", 0.9)
    post_result(world, "agent-2", 0.7)
    assert [(r["agent"], r["score"]) for r in board(world)["rows"]] == [
        ("agent-1", 0.9),
        ("agent-2", 0.7),
    ]
    every = board(world, best_per_agent="false")
    assert [r["score"] for r in every["rows"]] == [0.9, 0.7, 0.6]


def test_bs_7_32_ties_go_to_the_earlier_stamp(world: World, clock: FrozenClock) -> None:
    world.agent("agent-2")
    world.agent("agent-1")
    early = post_result(world, "agent-2", 0.8)
    clock.advance(1)
    late = post_result(world, "agent-1", 0.8)
    assert [r["filename"] for r in board(world)["rows"]] == [early, late]
    same_ms = rank(
        [
            Entry("x_b.md", "b", "20260301-120000-000", {"score": 1, "status": "agent-run"}),
            Entry("x_a.md", "a", "20260301-120000-000", {"score": 1, "status": "agent-run"}),
        ],
        {},
        score_field="score",
        order="desc",
    )
    assert [row.agent for row in same_ms.rows] == ["a", "b"]


def test_bs_4_13_bs_7_33_response_carries_score_field_order_rows_and_meta(world: World) -> None:
    world.hub.settings.score_field = "accuracy"
    world.hub.settings.required_result_fields = "accuracy,method,status,description"
    world.agent("agent-1", "alice")
    fm = {"accuracy": 0.75, "method": "cnn", "status": "agent-run", "description": "first"}
    lines = "".join(f"{k}: {json.dumps(v)}\n" for k, v in fm.items())
    world.put("agent-1", "r.md", f"---\n{lines}---\n")
    filename = world.client.post(
        "/v1/results", json={"source": world.uri("agent-1", "r.md")}
    ).json()["filename"]
    body = board(world)
    assert body["score_field"] == "accuracy" and body["order"] == "desc"
    assert body["rows"] == [
        {
            "rank": 1,
            "agent": "agent-1",
            "hf_user": "alice",
            "score": 0.75,
            "method": "cnn",
            "verification": "pending",
            "filename": filename,
            "timestamp": "2026-03-01T12:00:00.000Z",
            "description": "first",
            "baseline": False,
            "pin": None,
        }
    ]
    assert body["baselines"] == []
    assert body["meta"]["generated_at"] == "2026-03-01T12:00:00Z"
    # Only states a result was left out for are named (none here), as agent-collabs does.
    assert body["meta"]["excluded"] == {"status_negative": 0, "malformed": 0}


def test_bs_7_34_agent_filter_keeps_the_global_rank_and_limit(world: World) -> None:
    for agent, score in (("agent-1", 0.9), ("agent-2", 0.8), ("agent-3", 0.7)):
        world.agent(agent)
        post_result(world, agent, score)
    only = board(world, agent="agent-3")
    assert [(r["rank"], r["agent"]) for r in only["rows"]] == [(3, "agent-3")]
    assert [r["agent"] for r in board(world, limit="2")["rows"]] == ["agent-1", "agent-2"]
    assert world.client.get("/v1/leaderboard", params={"limit": "0"}).status_code == 400


def test_bs_7_35_digest_has_top_ten_leaderboard_and_recent_results(
    world: World, clock: FrozenClock
) -> None:
    for i in range(12):
        world.agent(f"agent-{i}")
        post_result(world, f"agent-{i}", 0.1 + i / 100)
    clock.advance(3600)
    digest = world.client.get("/v1/digest", params={"since": "2026-03-01T12:30:00Z"}).json()
    rows = digest["leaderboard"]
    assert len(rows) == 10 and rows[0]["agent"] == "agent-11"  # not since-filtered
    assert digest["leaderboard_meta"]["score_field"] == "score"
    assert digest["results"]["items"] == []  # recent results are since-filtered
    recent = world.client.get("/v1/digest").json()["results"]
    assert len(recent["items"]) == 10 and recent["count"] == 12
    assert recent["items"][0]["verification"] == "pending"


def test_bs_7_36_digest_inbox_with_as(world: World) -> None:
    world.agent("agent-1")
    digest = world.client.get("/v1/digest", params={"as": "agent-1"}).json()
    assert digest["inbox"] == {"count": 0, "items": []}
    assert world.client.get("/v1/digest").json()["inbox"] is None
    assert world.client.get("/v1/digest", params={"as": "agent-9"}).status_code == 404


def test_bs_1_18_absent_index_entry_reads_pending(world: World, clock: FrozenClock) -> None:
    world.agent("agent-1")
    decided = post_result(world, "agent-1", 0.5)
    undecided = post_result(world, "agent-1", 0.6)
    set_index(world, clock, {decided: "valid"})
    states = {
        item["filename"]: item["verification"]
        for item in world.client.get("/v1/results", params={"expand": "true"}).json()["items"]
    }
    assert states == {decided: "valid", undecided: "pending"}


def test_bs_9_3_admin_verdict_edit_is_picked_up_within_the_listing_ttl(
    world: World, clock: FrozenClock
) -> None:
    world.agent("agent-1")
    filename = post_result(world, "agent-1", 0.5)
    assert board(world)["rows"][0]["verification"] == "pending"
    world.hub.store.write_batch(
        world.hub.central, Batch(adds=[(INDEX, json.dumps({filename: "valid"}).encode())])
    )
    clock.advance(world.hub.settings.listing_ttl_s - 1)
    assert board(world)["rows"][0]["verification"] == "pending"  # still inside the TTL
    clock.advance(2)
    assert board(world)["rows"][0]["verification"] == "valid"
    assert world.client.get(f"/v1/results/{filename}").json()["verification"] == "valid"


def test_bs_4_60_any_verification_mode_works_through_the_index(
    world: World, clock: FrozenClock
) -> None:
    """manual / eval-space / jobs all end as an index entry; the backend only reads it."""
    world.agent("agent-1")
    filename = post_result(world, "agent-1", 0.5)
    for verdict in ("invalid", "valid", "pending"):
        set_index(world, clock, {filename: verdict})
        listed = world.client.get("/v1/results", params={"verification": verdict}).json()
        assert listed["items"] == [filename]
        strict = board(world, verification=verdict)
        assert [r["verification"] for r in strict["rows"]] == [verdict]


def test_bs_7_27_incremental_ranking_equals_the_pure_function_after_edits(
    world: World, clock: FrozenClock
) -> None:
    from agenthub.bucketsync.results.leaderboard import result_entries

    for agent in ("agent-1", "agent-2", "agent-3"):
        world.agent(agent)
    names = [post_result(world, a, s) for a, s in (("agent-1", 0.4), ("agent-2", 0.6))]
    post_result(world, "agent-3", 0.5)
    board(world, best_per_agent="false")  # warm the incremental index
    central = world.hub.central
    rewritten = b"---\nscore: 0.95\nstatus: agent-run\nmethod: m\ndescription: d\n---\n"
    world.hub.store.write_batch(
        central,
        Batch(adds=[(f"results/{names[0]}", rewritten)], deletes=[f"results/{names[1]}"]),
    )
    # The Space's own writes stay in the read model's overlay for up to 2 TTLs.
    clock.advance(2 * world.hub.settings.listing_ttl_s + 1)
    post_result(world, "agent-2", 0.7)
    served = board(world, best_per_agent="false")["rows"]
    pure = rank(
        result_entries(world.hub), {}, score_field="score", order="desc", best_per_agent=False
    )
    assert [(r["filename"], r["score"]) for r in served] == [
        (row.filename, row.score) for row in pure.rows
    ]
    assert [r["score"] for r in served] == [0.95, 0.7, 0.5]
