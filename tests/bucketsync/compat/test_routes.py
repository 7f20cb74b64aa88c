"""Conformance with agent-collabs' backend, following its route tests
(`backend/tests/test_*_api.py`): for each request there, the status, the error code and
the response keys. Where the seed decides otherwise the test says so and
docs/compatibility.md lists it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.bucketsync.compat.shapes import (
    AGENT,
    CHANNEL_SUBSCRIBED,
    CONVENTIONS,
    DIGEST,
    DIGEST_STATS,
    DISCOVERY,
    LEADERBOARD,
    LEADERBOARD_META,
    LEADERBOARD_ROW,
    LISTING,
    ME,
    MESSAGE_LISTING,
    MESSAGE_POSTED,
    RECORD,
    REGISTER,
    RESULT_POSTED,
    RESULT_RECORD,
    STATS,
    TOKEN_TOTALS,
    TRACE_POSTED,
    TRACE_RECORD,
    TRACE_SUMMARY,
    WATCHING,
    WATCHING_ENTRY,
    has,
    upstream_manifest,
)
from tests.bucketsync.conftest import World, message
from tests.bucketsync.live_support import LiveWorld, live

__all__ = ["live"]


def bundle(world: World, agent: str, session: str, text: str, log: bytes | None = None) -> str:
    """Stage a trace bundle as agent-collabs' client does; the source has no slash."""
    assert world.put(agent, f"traces/{session}/manifest.md", text).status_code == 201
    if log is not None:
        assert world.put(agent, f"traces/{session}/session.jsonl", log).status_code == 201
    return world.uri(agent, f"traces/{session}")


def result(score: float) -> str:
    return message("did it", score=score, method="m", status="agent-run", description="d")


# -- agents ---------------------------------------------------------------------------------


def test_register_answers_and_agent_records_carry_its_keys(world: World) -> None:
    world.user("alice")
    world._owner = {**world._owner, "agent-1": "alice"}
    world.create_bucket("agent-1", "alice")
    world.put("agent-1", ".bucket-sync-handshake", "alice")
    posted = world.register("agent-1", "alice", model="opus", harness="claude-code", tools=["x"])
    assert posted.status_code == 201
    has(posted.json(), REGISTER)
    again = world.register("agent-1", "alice")
    assert again.status_code == 409 and again.json()["error"]["code"] == "AGENT_ID_TAKEN"
    one = world.client.get("/v1/agents/agent-1").json()
    has(one, AGENT)
    assert (one["model"], one["harness"], one["tools"]) == ("opus", "claude-code", ["x"])
    listed = world.client.get("/v1/agents?expand=true&model=opus").json()
    has(listed, LISTING)
    assert [a["agent_id"] for a in listed["items"]] == ["agent-1"]
    missing = world.client.get("/v1/agents/ghost")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_REGISTERED"


def test_me_answers_its_keys(world: World) -> None:
    world.user("alice")
    me = world.client.get("/v1/me", headers=world.auth("alice"))
    assert me.status_code == 200
    has(me.json(), ME)
    assert world.client.get("/v1/me").status_code == 401


# -- messages and inbox ---------------------------------------------------------------------


def test_message_post_list_and_read_carry_its_keys(world: World) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    posted = world.raw("agent-1", "hello @agent-2", refs="x.md")
    assert posted.status_code == 201
    has(posted.json(), MESSAGE_POSTED)
    assert posted.json()["mentions_delivered"] == ["agent-2"]
    filename = posted.json()["filename"]
    listed = world.client.get("/v1/messages?expand=true").json()
    has(listed, MESSAGE_LISTING)
    has(listed["items"][0], RECORD | {"reasons"})
    assert listed["cursor"] == filename
    one = world.client.get(f"/v1/messages/{filename}").json()
    has(one, RECORD)
    assert one["frontmatter"]["refs"] == "x.md"  # a string stays a string
    inbox = world.client.get("/v1/inbox/agent-2?expand=true").json()
    has(inbox, MESSAGE_LISTING)
    assert [m["filename"] for m in inbox["items"]] == [filename]
    assert world.client.get("/v1/messages/nope.md").status_code == 404


def test_message_errors_match(world: World) -> None:
    world.agent("agent-1")
    unregistered = world.raw("ghost", "hi")
    assert unregistered.status_code == 404
    assert unregistered.json()["error"]["code"] == "NOT_REGISTERED"
    foreign = world.client.post(
        "/v1/messages", json={"source": "hf://buckets/other-org/x-agent-1/m.md"}
    )
    assert foreign.status_code == 400 and foreign.json()["error"]["code"] == "INVALID_PATH"
    promoted = world.promote("agent-1", "m.md", "a finding")
    assert promoted.status_code == 201
    again = world.client.post("/v1/messages", json={"source": world.uri("agent-1", "m.md")})
    assert again.status_code == 409 and again.json()["error"]["code"] == "ALREADY_PROMOTED"
    smuggled = world.promote("agent-1", "s.md", message("x", filename="z.md"))
    assert smuggled.status_code == 400
    assert smuggled.json()["error"]["code"] == "INVALID_FRONTMATTER"


# -- results and the leaderboard ------------------------------------------------------------


def test_results_and_leaderboard_carry_its_keys(world: World) -> None:
    world.agent("agent-1")
    assert world.put("agent-1", "r.md", result(100.0)).status_code == 201
    posted = world.client.post("/v1/results", json={"source": world.uri("agent-1", "r.md")})
    assert posted.status_code == 201
    has(posted.json(), RESULT_POSTED)
    listed = world.client.get("/v1/results?expand=true").json()
    has(listed, LISTING)
    has(listed["items"][0], RESULT_RECORD)
    assert listed["items"][0]["verification"] == "pending"
    board = world.client.get("/v1/leaderboard").json()
    has(board, LEADERBOARD)
    has(board["meta"], LEADERBOARD_META)
    has(board["rows"][0], LEADERBOARD_ROW)
    assert board["rows"][0]["agent"] == "agent-1" and board["rows"][0]["rank"] == 1


# -- traces and stats -----------------------------------------------------------------------


def test_a_stats_share_without_the_slash_answers_the_folder(world: World) -> None:
    world.agent("agent-1")
    source = bundle(world, "agent-1", "sess-1", upstream_manifest("sess-1"), log=b"{}\n")
    response = world.client.post("/v1/traces", json={"source": source})
    assert response.status_code == 201
    body = response.json()
    has(body, TRACE_POSTED)
    assert body["path"] == "traces/agent-1/sess-1/"
    assert (body["share"], body["files_copied"], body["completeness"]) == ("stats", 0, "full")
    assert world.hub.store.read(world.hub.central, "traces/agent-1/sess-1/session.jsonl") is None


def test_a_full_share_copies_the_declared_log_and_counts_it(world: World) -> None:
    world.agent("agent-1")
    text = upstream_manifest("sess-1", native_log_file="session.jsonl")
    source = bundle(world, "agent-1", "sess-1", text, log=b'{"type":"user"}\n')
    assert world.put("agent-1", "traces/sess-1/stale.jsonl", b"old").status_code == 201
    response = world.client.post("/v1/traces", json={"source": source, "share": "full"})
    assert response.status_code == 201
    assert (response.json()["files_copied"], response.json()["bytes_copied"]) == (1, 16)
    assert world.hub.store.read(world.hub.central, "traces/agent-1/sess-1/stale.jsonl") is None
    detail = world.client.get("/v1/traces/agent-1/sess-1").json()
    has(detail, TRACE_RECORD)
    assert detail["path"] == "traces/agent-1/sess-1/"
    assert detail["log_files"] == ["traces/agent-1/sess-1/session.jsonl"]
    assert detail["frontmatter"]["usage"]["total_tokens"] == 6500


@pytest.mark.parametrize(
    ("manifest", "share", "code"),
    [
        ("---\nharness: claude-code\n---\nno ids\n", None, "INVALID_FRONTMATTER"),
        (upstream_manifest("sess-1", usage={"total_tokens": -5}), None, "INVALID_FRONTMATTER"),
        (upstream_manifest("sess-1", usage={"total_tokens": 12.7}), None, "INVALID_FRONTMATTER"),
        (upstream_manifest("sess-1", started_at="not-a-date"), None, "INVALID_FRONTMATTER"),
        (upstream_manifest("sess-1"), "full", "INVALID_FRONTMATTER"),  # no native_log_file
        (upstream_manifest("other-session"), None, "INVALID_PATH"),
    ],
)
def test_trace_manifest_refusals_match(
    world: World, manifest: str, share: str | None, code: str
) -> None:
    world.agent("agent-1")
    body: dict[str, Any] = {"source": bundle(world, "agent-1", "sess-1", manifest)}
    if share:
        body["share"] = share
    response = world.client.post("/v1/traces", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code


def test_trace_source_refusals_match(world: World) -> None:
    world.agent("agent-1")
    assert world.put("agent-1", "traces/sess-1/session.jsonl", b"{}\n").status_code == 201
    no_manifest = world.client.post(
        "/v1/traces", json={"source": world.uri("agent-1", "traces/sess-1")}
    )
    assert no_manifest.status_code == 400
    assert world.put("agent-1", "scratch/sess-1/manifest.md", upstream_manifest("sess-1"))
    elsewhere = world.client.post(
        "/v1/traces", json={"source": world.uri("agent-1", "scratch/sess-1")}
    )
    assert elsewhere.status_code == 400 and elsewhere.json()["error"]["code"] == "INVALID_PATH"
    foreign = world.client.post(
        "/v1/traces", json={"source": "hf://buckets/other-org/x-agent-1/traces/s"}
    )
    assert foreign.status_code == 400 and foreign.json()["error"]["code"] == "INVALID_PATH"
    world.user("ghost-owner")
    world._owner = {**world._owner, "ghost": "ghost-owner"}
    world.create_bucket("ghost", "ghost-owner")
    world.put("ghost", "traces/s/manifest.md", upstream_manifest("s"))
    ghost = world.client.post("/v1/traces", json={"source": world.uri("ghost", "traces/s")})
    assert ghost.status_code == 404 and ghost.json()["error"]["code"] == "NOT_REGISTERED"


def test_completeness_degrades_to_partial_and_is_never_refused(world: World) -> None:
    world.agent("agent-1")
    unknown = upstream_manifest("a", harness="cursor", usage=None, activity=None)
    known_no_tools = upstream_manifest("b", activity=None)
    for session, text in (("a", unknown), ("b", known_no_tools)):
        response = world.client.post(
            "/v1/traces", json={"source": bundle(world, "agent-1", session, text)}
        )
        assert response.status_code == 201
        assert response.json()["completeness"] == "partial"


def test_the_library_lists_flat_summaries_and_filters(world: World) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    text = upstream_manifest("a", native_log_file="session.jsonl")
    source = bundle(world, "agent-1", "a", text, log=b"{}\n")
    assert world.client.post("/v1/traces", json={"source": source, "share": "full"})
    other = bundle(world, "agent-2", "b", upstream_manifest("b", harness="codex"))
    assert world.client.post("/v1/traces", json={"source": other}).status_code == 201
    listed = world.client.get("/v1/traces?expand=true&harness=claude-code").json()
    assert (listed["count"], listed["matched"]) == (2, 1)
    item = listed["items"][0]
    has(item, TRACE_SUMMARY)
    assert (item["agent"], item["session_id"], item["harness"]) == ("agent-1", "a", "claude-code")
    assert (item["total_tokens"], item["tool_calls"]) == (6500, 18)
    assert "Swept BPE" in item["summary_excerpt"]
    assert item["primary_log_file"] == "traces/agent-1/a/session.jsonl"
    assert item["path"] == "traces/agent-1/a/" and item["promoted_at"]
    ids = world.client.get("/v1/traces").json()["items"]
    assert sorted(ids) == ["agent-1/a", "agent-2/b"]
    assert world.client.get("/v1/traces/agent-1/nope").status_code == 404


def test_stats_carry_its_aggregate(world: World) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    empty = world.client.get("/v1/stats").json()
    has(empty, STATS)
    assert empty["tokens"]["total"] == 0 and empty["agents_reporting"] == 0
    source = bundle(world, "agent-1", "a", upstream_manifest("a", cost_usd=4.0))
    assert world.client.post("/v1/traces", json={"source": source}).status_code == 201
    bare = upstream_manifest("b", harness="cursor", usage=None, activity=None)
    source = bundle(world, "agent-2", "b", bare)
    assert world.client.post("/v1/traces", json={"source": source}).status_code == 201
    stats = world.client.get("/v1/stats").json()
    has(stats["tokens"], TOKEN_TOTALS)
    assert (stats["tokens"]["total"], stats["tokens"]["cache_read"]) == (6500, 5000)
    assert (stats["sessions_counted"], stats["sessions_missing_tokens"]) == (1, 1)
    assert stats["agents_reporting"] == 2 and stats["cost_usd"] == 4.0
    assert stats["by_agent"]["agent-1"]["total"] == 6500
    assert stats["by_model"]["claude-opus-4-8"]["total"] == 6500
    assert stats["by_day"]["2026-06-25"]["total"] == 6500
    assert stats["generated_at"].endswith("Z")


# -- digest, discovery, presence ------------------------------------------------------------


def test_digest_carries_its_keys_and_types(world: World) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    first = world.raw("agent-1", "hello board").json()["filename"]
    second = world.raw("agent-2", "news for @agent-1").json()["filename"]
    assert world.put("agent-1", "r.md", result(100.0)).status_code == 201
    assert world.client.post("/v1/results", json={"source": world.uri("agent-1", "r.md")})
    digest = world.client.get("/v1/digest").json()
    has(digest, DIGEST)
    assert digest["agents"]["count"] == 2
    assert all(isinstance(a, str) for a in digest["agents"]["newest"])
    assert digest["leaderboard"][0]["agent"] == "agent-1"
    assert [m["filename"] for m in digest["recent_messages"]] == [second, first]
    has(digest["recent_messages"][0], RECORD)
    assert digest["recent_results"][0]["verification"] == "pending"
    assert digest["inbox"] is None and digest["updates"] is None and digest["watching"] is None
    assert digest["stats"] is None  # until the first trace is shared
    mine = world.client.get("/v1/digest?as=agent-1").json()
    assert mine["inbox"]["count"] == 1 and mine["inbox"]["items"][0]["filename"] == second
    assert world.client.get("/v1/digest?as=human-zed").json()["inbox"] == {"count": 0, "items": []}
    assert world.client.get("/v1/digest?as=ghost").status_code == 404
    source = bundle(world, "agent-1", "a", upstream_manifest("a"))
    assert world.client.post("/v1/traces", json={"source": source}).status_code == 201
    stats = world.client.get("/v1/digest").json()["stats"]
    has(stats, DIGEST_STATS)
    assert stats == {"total_tokens": 6500, "sessions_counted": 1, "agents_reporting": 1}


def test_discovery_carries_its_keys(world: World) -> None:
    doc = world.client.get("/v1").json()
    has(doc, DISCOVERY)
    has(doc["conventions"], CONVENTIONS)
    assert doc["docs"] == "/docs" and world.client.get("/docs").status_code == 200
    paths = {e["path"] for e in doc["endpoints"]}
    assert {"/v1/digest", "/v1/leaderboard", "/v1/inbox/{handle}", "/v1/messages"} <= paths
    assert {"/v1/updates", "/v1/watch.sh", "/v1/channels/feed", "/v1/watching"} <= paths


def test_watching_entries_carry_its_shape(live: LiveWorld) -> None:
    live.agent("agent-2")
    assert live.client.get("/v1/digest?as=agent-2").json()["watching"] is None
    parked = live.park("/v1/updates?as=agent-2&wait=30")
    body = live.client.get("/v1/watching").json()
    has(body, WATCHING)
    entry = body["watching"]["agent-2"]
    has(entry, WATCHING_ENTRY)
    assert (entry["mode"], entry["stream"]) == ("parked", "updates")
    assert isinstance(entry["last_poll_age_s"], int)
    block = live.client.get("/v1/digest?as=agent-2").json()["watching"]
    assert (block["mode"], block["stream"]) == ("parked", "updates")
    live.timer.advance(30)
    assert parked.result(timeout=5).status_code == 200


# -- channels -------------------------------------------------------------------------------


def test_the_feed_serves_plain_filenames_with_an_exclusive_cursor(live: LiveWorld) -> None:
    live.agent("bb")
    live.agent("reader")
    for name in ("alpha", "beta", "gamma"):
        assert live.channel(name).status_code == 201
    a1 = live.raw("bb", "a1", channel="alpha").json()["filename"]
    b1 = live.raw("bb", "b1", channel="beta").json()["filename"]
    live.raw("bb", "not for reader", channel="gamma")
    subscribed = live.subscribe("alpha", "reader")
    assert subscribed.status_code == 200
    has(subscribed.json(), CHANNEL_SUBSCRIBED)
    assert live.subscribe("beta", "reader").json()["changed"] is True
    feed = live.client.get("/v1/channels/feed?as=reader&expand=true&order=asc").json()
    has(feed, MESSAGE_LISTING)
    assert feed["matched"] == 2
    assert [m["body"].strip() for m in feed["items"]] == ["a1", "b1"]
    assert feed["cursor"] == b1
    plain = live.client.get("/v1/channels/feed?as=reader&order=asc").json()
    assert plain["items"] == [a1, b1] and plain["cursor"] == b1
    page = live.client.get(f"/v1/channels/feed?as=reader&order=asc&after={a1}&expand=true")
    assert [m["body"].strip() for m in page.json()["items"]] == ["b1"]
    assert live.client.get("/v1/channels/feed?as=ghost").status_code == 404
