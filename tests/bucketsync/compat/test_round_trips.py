"""Round trips with shapes exactly as agent-collabs' clients produce and read them."""

from __future__ import annotations

from typing import Any

from tests.bucketsync.compat.shapes import upstream_manifest
from tests.bucketsync.conftest import World, message
from tests.bucketsync.live_support import LiveWorld, live

__all__ = ["live"]


def digest_summary(digest: dict[str, Any]) -> dict[str, Any]:
    """What a prompt or harness written against agent-collabs' digest reads."""
    return {
        "messages": [m["filename"] for m in digest["recent_messages"]],
        "results": [(r["filename"], r["verification"]) for r in digest["recent_results"]],
        "board": [(row["rank"], row["agent"], row["score"]) for row in digest["leaderboard"]],
        "newest": list(digest["agents"]["newest"]),
        "tokens": digest["stats"]["total_tokens"] if digest["stats"] else None,
    }


def test_an_upstream_manifest_promoted_without_the_slash_is_counted(world: World) -> None:
    world.agent("agent-1")
    assert world.put("agent-1", "traces/s-1/manifest.md", upstream_manifest("s-1")).status_code
    response = world.client.post("/v1/traces", json={"source": world.uri("agent-1", "traces/s-1")})
    assert response.status_code == 201, response.text
    assert response.json()["completeness"] == "full"
    stats = world.client.get("/v1/stats").json()
    assert stats["tokens"]["total"] == 6500 and stats["tokens"]["cache_creation"] == 300
    assert stats["sessions_counted"] == 1 and stats["sessions_missing_tokens"] == 0


def test_a_manifest_is_counted_as_it_says_with_no_total_summed_from_parts(world: World) -> None:
    """Ours reports parts only; agent-collabs' a total. Each is taken as written."""
    world.agent("agent-1")
    parts = {"input_tokens": 10, "output_tokens": 5}
    assert world.put("agent-1", "traces/p/manifest.md", upstream_manifest("p", usage=parts))
    assert world.client.post("/v1/traces", json={"source": world.uri("agent-1", "traces/p")})
    total = world.client.get("/v1/traces?expand=true").json()["items"][0]["total_tokens"]
    assert total == 15


def test_a_digest_consumer_gets_values(world: World) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    posted = world.raw("agent-2", "hi").json()["filename"]
    assert world.put("agent-1", "r.md", message("x", score=3, method="m", status="agent-run",
                                                description="d")).status_code == 201  # fmt: skip
    result = world.client.post("/v1/results", json={"source": world.uri("agent-1", "r.md")})
    assert world.put("agent-1", "traces/s/manifest.md", upstream_manifest("s")).status_code
    assert world.client.post("/v1/traces", json={"source": world.uri("agent-1", "traces/s")})
    summary = digest_summary(world.client.get("/v1/digest").json())
    assert summary == {
        "messages": [posted],
        "results": [(result.json()["filename"], "pending")],
        "board": [(1, "agent-1", 3.0)],
        "newest": ["agent-2", "agent-1"],
        "tokens": 6500,
    }


def test_the_feed_cursor_is_a_plain_filename_a_watcher_can_resume_from(live: LiveWorld) -> None:
    live.agent("agent-1")
    live.agent("agent-2")
    assert live.channel("ideas").status_code == 201
    live.subscribe("ideas", "agent-2")
    first = live.raw("agent-1", "one", channel="ideas").json()["filename"]
    page = live.client.get("/v1/channels/feed?as=agent-2&expand=true").json()
    cursor = page["cursor"]  # what collab_watch.sh persists verbatim
    assert cursor == first
    second = live.raw("agent-1", "two", channel="ideas").json()["filename"]
    resumed = live.client.get(f"/v1/channels/feed?as=agent-2&after={cursor}").json()
    assert resumed["items"] == [second] and resumed["cursor"] == second


def test_a_filename_minted_in_two_channels_is_listed_twice(live: LiveWorld) -> None:
    live.agent("agent-1")
    live.agent("agent-2")
    for name in ("alpha", "beta"):
        assert live.channel(name).status_code == 201
        assert live.subscribe(name, "agent-2").status_code == 200
    twin = "20260301-120000-500_agent-1.md"
    text = message("same name", agent="agent-1", timestamp="2026-03-01T12:00:00.500Z")
    live.hub.write_central(
        [(f"channels/{name}/{twin}", text.encode()) for name in ("alpha", "beta")]
    )
    feed = live.client.get("/v1/channels/feed?as=agent-2&order=asc&expand=true").json()
    assert [m["path"] for m in feed["items"]] == [f"channels/alpha/{twin}", f"channels/beta/{twin}"]
    plain = live.client.get("/v1/channels/feed?as=agent-2&order=asc").json()
    assert plain["items"] == [twin, twin] and plain["cursor"] == twin
    # A page that splits the twins keeps the channel in its cursor, so nothing is skipped.
    split = live.client.get("/v1/channels/feed?as=agent-2&order=asc&limit=1").json()
    assert split["items"] == [twin] and split["cursor"] == f"{twin}~alpha"
    rest = live.client.get(f"/v1/channels/feed?as=agent-2&order=asc&after={split['cursor']}")
    assert rest.json()["items"] == [twin] and rest.json()["cursor"] == twin
    # The broken variant: resuming from the bare filename would skip beta's copy.
    skipped = live.client.get(f"/v1/channels/feed?as=agent-2&order=asc&after={twin}").json()
    assert skipped["items"] == []
