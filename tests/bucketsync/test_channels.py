"""Channels (seed §12) and the unified update stream's channel side (§13)."""

from __future__ import annotations

from typing import Any

import pytest

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.errors import StorageUnavailable
from agenthub.bucketsync.identity.base import Caller
from tests.bucketsync.live_support import LiveWorld, live

__all__ = ["live"]


@pytest.fixture
def room(live: LiveWorld) -> LiveWorld:
    live.agent("agent-1")
    live.agent("agent-2")
    assert live.channel("ideas", "Ideas worth trying").status_code == 201
    return live


def central(world: LiveWorld) -> str:
    return world.hub.settings.central_bucket


def read(world: LiveWorld, path: str) -> bytes | None:
    return world.hub.store.read(central(world), path)


def test_bs_1_15_bs_4_7_organizer_creates_a_channel_whose_readme_is_its_existence(
    room: LiveWorld,
) -> None:
    readme = read(room, "channels/ideas/README.md")
    assert readme is not None and b"Ideas worth trying" in readme
    assert room.client.get("/v1/channels/ideas").status_code == 200
    assert room.client.get("/v1/channels/nothing").json()["error"]["code"] == ("CHANNEL_NOT_FOUND")


def test_bs_12_1_channel_names_are_lowercase_slugs_and_feed_is_reserved(live: LiveWorld) -> None:
    upper = live.channel("Ideas").json()["error"]
    assert upper["code"] == "INVALID_PATH" and "'ideas'" in upper["hint"]
    reserved = live.channel("feed").json()["error"]
    assert reserved["code"] == "INVALID_PATH" and "reserved" in reserved["message"]


def test_bs_12_2_only_organizers_create_channels(room: LiveWorld) -> None:
    room.user("carol")
    as_contributor = room.client.post(
        "/v1/channels",
        json={"name": "x", "agent_id": "human-carol", "body": "t"},
        headers=room.auth("carol"),
    )
    assert as_contributor.status_code == 403
    assert as_contributor.json()["error"]["code"] == "NOT_ORGANIZER"
    as_agent = room.client.post(
        "/v1/channels", json={"name": "x", "agent_id": "agent-1", "body": "t"}
    )
    assert as_agent.json()["error"]["code"] == "NOT_ORGANIZER"
    with_source = room.client.post(
        "/v1/channels", json={"name": "x", "source": room.uri("agent-1", "t.md")}
    )
    assert with_source.json()["error"]["code"] == "NOT_ORGANIZER"


def test_bs_12_2_a_failed_role_lookup_is_a_retryable_503(room: LiveWorld) -> None:
    identity = room.hub.identity

    class RolesDown:
        def whoami(self, token: str) -> Caller:
            return identity.whoami(token)

        def org_role(self, org: str, user: str, email: str | None = None) -> str | None:
            raise StorageUnavailable("members API down")

    room.hub.identity = RolesDown()
    response = room.channel("later")
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "ORGANIZER_CHECK_UNAVAILABLE"
    assert read(room, "channels/later/README.md") is None


def test_bs_12_3_an_empty_theme_is_refused(room: LiveWorld) -> None:
    assert room.channel("blank", "   \n").status_code == 400


def test_bs_12_4_creation_writes_readme_marker_and_announcement_together(
    room: LiveWorld,
) -> None:
    created = room.channel("evals", "How we evaluate").json()
    assert created["created"] is True and created["path"] == "channels/evals/README.md"
    assert read(room, "channels/evals/members/human-boss.md") is not None
    announcement = room.client.get(f"/v1/messages/{created['announcement']}").json()
    assert announcement["frontmatter"]["via"] == "server"
    assert announcement["frontmatter"]["type"] == "note"
    assert announcement["agent"] == "human-boss" and "#evals" in announcement["body"]
    assert "subscribe" in announcement["body"]


def test_bs_12_5_creator_updates_the_theme_others_conflict(room: LiveWorld) -> None:
    messages_before = room.client.get("/v1/messages").json()["count"]
    updated = room.channel("ideas", "A sharper theme")
    assert updated.status_code == 200
    assert updated.json()["created"] is False and updated.json()["announcement"] is None
    detail = room.client.get("/v1/channels/ideas").json()
    assert detail["updated"] is not None and "sharper" in detail["theme"]["body"]
    assert room.client.get("/v1/messages").json()["count"] == messages_before
    other = room.channel("ideas", "mine now", by="zed")
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "CHANNEL_EXISTS"
    assert "human-boss" in other.json()["error"]["message"]


def test_bs_12_6_theme_updates_are_not_deduplicated(room: LiveWorld) -> None:
    assert room.channel("ideas", "same").status_code == 200
    assert room.channel("ideas", "same").status_code == 200


def test_bs_1_16_bs_12_7_posting_into_a_channel(room: LiveWorld) -> None:
    posted = room.raw("agent-1", "first idea", channel="ideas").json()
    assert posted["channel"] == "ideas"
    assert posted["path"] == f"channels/ideas/{posted['filename']}"
    data = read(room, posted["path"])
    assert data is not None and b"channel: ideas" in data
    missing = room.raw("agent-1", "lost", channel="nowhere")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "CHANNEL_NOT_FOUND"


def test_bs_12_7_source_posts_land_in_the_channel(room: LiveWorld) -> None:
    response = room.client.post(
        "/v1/messages",
        json={"source": room.uri("agent-1", "m.md"), "channel": "ideas"},
    )
    assert response.status_code == 404  # the source file does not exist yet
    assert room.put("agent-1", "m.md", "from my bucket").status_code == 201
    posted = room.client.post(
        "/v1/messages", json={"source": room.uri("agent-1", "m.md"), "channel": "ideas"}
    ).json()
    assert posted["path"].startswith("channels/ideas/") and posted["via"] == "bucket"


def test_bs_12_8_source_frontmatter_cannot_set_channel(room: LiveWorld) -> None:
    response = room.promote("agent-1", "c.md", "---\nchannel: ideas\n---\nsneaky")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_FRONTMATTER"


def test_bs_12_9_channel_and_broadcast_together_are_rejected(room: LiveWorld) -> None:
    response = room.client.post(
        "/v1/messages",
        json={"agent_id": "human-boss", "body": "x", "broadcast": True, "channel": "ideas"},
        headers=room.auth("boss"),
    )
    assert response.status_code == 400


def test_bs_12_10_bs_12_11_channel_posts_stay_off_the_board_but_mentions_fan_out(
    room: LiveWorld,
) -> None:
    board_before = room.client.get("/v1/messages").json()["count"]
    posted = room.raw("agent-1", "what do you think @agent-2", channel="ideas").json()
    assert posted["mentions_delivered"] == ["agent-2"]
    assert room.client.get("/v1/messages").json()["count"] == board_before
    inbox = room.client.get("/v1/inbox/agent-2?expand=true").json()["items"]
    assert [i["filename"] for i in inbox] == [posted["filename"]]
    assert inbox[0]["frontmatter"]["channel"] == "ideas"
    assert room.client.get("/v1/inbox/agent-1").json()["count"] == 0


def test_bs_12_12_posting_subscribes_the_author_once(room: LiveWorld) -> None:
    first = room.raw("agent-1", "one", channel="ideas").json()
    second = room.raw("agent-1", "two", channel="ideas").json()
    assert first["auto_subscribed"] is True and second["auto_subscribed"] is False
    marker = read(room, naming.channel_member_path("ideas", "agent-1"))
    assert marker is not None and b"via: auto" in marker


def test_bs_12_13_same_millisecond_posts_get_distinct_filenames(room: LiveWorld) -> None:
    names = {room.raw("agent-1", f"n{i}", channel="ideas").json()["filename"] for i in range(3)}
    board = room.raw("agent-1", "board").json()["filename"]
    assert len(names | {board}) == 4


def test_bs_1_17_bs_4_10_bs_12_14_bs_12_15_subscribe_and_unsubscribe(room: LiveWorld) -> None:
    first = room.subscribe("ideas", "agent-2").json()
    assert first == {
        "channel": "ideas",
        "handle": "agent-2",
        "subscribed": True,
        "changed": True,
        "notify": "mentions",
    }
    marker = read(room, "channels/ideas/members/agent-2.md")
    assert marker is not None and b"via: subscribe" in marker and b"agent: agent-2" in marker
    assert room.subscribe("ideas", "agent-2").json()["changed"] is False
    body = {"source": room.uri("agent-2", "sub.md")}
    left = room.client.post("/v1/channels/ideas/unsubscribe", json=body).json()
    assert left["subscribed"] is False and left["changed"] is True
    assert read(room, "channels/ideas/members/agent-2.md") is None
    again = room.client.post("/v1/channels/ideas/unsubscribe", json=body).json()
    assert again["changed"] is False
    members = [m["handle"] for m in room.client.get("/v1/channels/ideas").json()["members"]]
    assert "agent-2" not in members


def test_bs_12_16_subscription_auth(room: LiveWorld) -> None:
    missing = room.client.post(
        "/v1/channels/ideas/subscribe", json={"source": room.uri("agent-2", "nothing.md")}
    )
    assert missing.json()["error"]["code"] == "SOURCE_NOT_FOUND"
    bare = room.client.post("/v1/channels/ideas/subscribe", json={"agent_id": "agent-2"})
    assert bare.status_code == 401
    room.user("ann")
    human = room.client.post(
        "/v1/channels/ideas/subscribe", json={"agent_id": "human-ann"}, headers=room.auth("ann")
    )
    assert human.status_code == 200 and human.json()["handle"] == "human-ann"
    wrong = room.client.post(
        "/v1/channels/ideas/subscribe", json={"agent_id": "human-bob"}, headers=room.auth("ann")
    )
    assert wrong.status_code == 403


def test_bs_12_17_missing_channel_is_404_everywhere(room: LiveWorld) -> None:
    body = {"source": room.uri("agent-2", "sub.md")}
    room.put("agent-2", "sub.md", "x")
    for response in (
        room.client.post("/v1/channels/nope/subscribe", json=body),
        room.client.post("/v1/channels/nope/unsubscribe", json=body),
        room.client.get("/v1/channels/nope/messages"),
        room.client.get("/v1/channels/nope"),
    ):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "CHANNEL_NOT_FOUND"


def test_bs_12_18_rosters_come_from_one_channels_listing(room: LiveWorld) -> None:
    room.subscribe("ideas", "agent-2")
    room.raw("agent-1", "x", channel="ideas")
    room.hub.read_model.invalidate("channels/")
    before = room.hub.read_model.listings_by_folder.get("channels/", 0)
    room.client.get("/v1/channels")
    room.client.get("/v1/channels/ideas")
    room.client.get("/v1/channels/feed?as=agent-2")
    assert room.hub.read_model.listings_by_folder["channels/"] == before + 1
    assert not any(
        e.path.endswith(("roster.json", "members.json"))
        for e in room.hub.store.list(central(room), "channels/", recursive=True)
    )


def test_bs_4_8_bs_12_19_channel_list_is_most_recently_active_first(room: LiveWorld) -> None:
    room.channel("quiet", "Nothing happens here")
    room.timer.advance(5)
    room.raw("agent-1", "busy", channel="ideas")
    listing = room.client.get("/v1/channels").json()
    assert listing["count"] == 2
    assert [i["name"] for i in listing["items"]] == ["ideas", "quiet"]
    ideas = listing["items"][0]
    assert ideas["member_count"] == 2 and ideas["message_count"] == 1
    assert set(ideas) == {
        "name",
        "creator",
        "created",
        "theme_excerpt",
        "member_count",
        "message_count",
        "last_activity",
    }
    searched = room.client.get("/v1/channels?q=nothing&limit=5").json()
    assert searched["matched"] == 1 and searched["items"][0]["name"] == "quiet"


def test_bs_12_20_channel_detail(room: LiveWorld) -> None:
    posts = []
    for i in range(6):
        room.timer.advance(13)  # stay under the raw-message limit (5/min)
        posts.append(room.raw("agent-1", f"p{i}", channel="ideas").json()["filename"])
    detail = room.client.get("/v1/channels/ideas").json()
    assert detail["theme"]["body"].startswith("Ideas worth trying")
    assert [m["handle"] for m in detail["members"]] == ["agent-1", "human-boss"]
    assert {"handle", "subscribed", "via", "notify"} == set(detail["members"][0])
    assert detail["message_count"] == 6
    assert [m["filename"] for m in detail["recent_messages"]] == posts[::-1][:5]
    assert detail["creator"] == "human-boss" and detail["created"]


def test_bs_12_21_channel_messages_take_the_list_grammar(room: LiveWorld) -> None:
    posts = [room.raw("agent-1", f"p{i}", channel="ideas").json()["filename"] for i in range(3)]
    page = room.client.get(f"/v1/channels/ideas/messages?after={posts[0]}&order=asc").json()
    assert page["items"] == posts[1:] and page["count"] == 3
    found = room.client.get("/v1/channels/ideas/messages?q=p2&expand=true").json()
    assert [i["body"].strip() for i in found["items"]] == ["p2"]


def test_bs_4_9_bs_12_22_feed_unions_subscribed_channels(room: LiveWorld) -> None:
    room.channel("evals", "Evaluation")
    a = room.raw("agent-1", "in ideas", channel="ideas").json()["filename"]
    b = room.raw("agent-1", "in evals", channel="evals").json()["filename"]
    room.subscribe("ideas", "agent-2")
    feed = room.client.get("/v1/channels/feed?as=agent-2&order=asc").json()
    assert feed["items"] == [a] and feed["cursor"] == a
    room.subscribe("evals", "agent-2")
    both = room.client.get("/v1/channels/feed?as=agent-2&order=asc&expand=true").json()
    assert [i["path"] for i in both["items"]] == [f"channels/ideas/{a}", f"channels/evals/{b}"]
    after = room.client.get(f"/v1/channels/feed?as=agent-2&after={a}").json()
    assert after["items"] == [b] and after["cursor"] == b
    assert room.client.get("/v1/channels/feed?as=nobody-here").status_code == 404


def test_bs_12_23_bs_13_32_digest_channel_blocks(room: LiveWorld) -> None:
    room.subscribe("ideas", "agent-2", notify="all")
    for i in range(4):
        room.raw("agent-1", f"p{i}", channel="ideas")
    digest = room.client.get("/v1/digest?as=agent-2").json()["channels"]
    assert digest["count"] == 1 and digest["channels"][0]["name"] == "ideas"
    (sub,) = digest["subscribed"]
    assert sub["name"] == "ideas" and sub["new_count"] == 4 and sub["notify"] == "all"
    assert len(sub["recent"]) == 3
    assert "subscribed" not in room.client.get("/v1/digest").json()["channels"]


def test_bs_12_24_leaving_keeps_the_members_posts(room: LiveWorld) -> None:
    posted = room.raw("agent-1", "stays", channel="ideas").json()
    room.put("agent-1", "leave.md", "bye")
    room.client.post(
        "/v1/channels/ideas/unsubscribe", json={"source": room.uri("agent-1", "leave.md")}
    )
    messages = room.client.get("/v1/channels/ideas/messages").json()["items"]
    assert posted["filename"] in messages


def test_bs_12_25_discovery_documents_channels(room: LiveWorld) -> None:
    doc = room.client.get("/v1").json()
    paths = {e["path"] for e in doc["endpoints"]}
    assert {"/v1/channels", "/v1/channels/feed", "/v1/channels/{name}/subscribe"} <= paths
    assert doc["conventions"]["channel_member"] == "channels/{name}/members/{handle}.md"


def _updates(world: LiveWorld, query: str = "") -> dict[str, Any]:
    response = world.client.get(f"/v1/updates?as=agent-2&expand=true{query}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_bs_13_17_updates_union_with_reasons_delivered_once(room: LiveWorld) -> None:
    room.subscribe("ideas", "agent-2", notify="all")
    both = room.raw("agent-1", "look @agent-2", channel="ideas").json()["filename"]
    plain = room.raw("agent-1", "just the room", channel="ideas").json()["filename"]
    direct = room.raw("agent-1", "board @agent-2").json()["filename"]
    room.client.post(
        "/v1/messages",
        json={"agent_id": "human-boss", "body": "all", "broadcast": True},
        headers=room.auth("boss"),
    )
    items = _updates(room, "&order=asc")["items"]
    reasons = {i["filename"]: i["reasons"] for i in items}
    assert reasons[both] == ["mention", "channel:ideas"]
    assert reasons[plain] == ["channel:ideas"]
    assert reasons[direct] == ["mention"]
    assert sorted(r for rs in reasons.values() for r in rs).count("broadcast") == 1
    assert len(items) == 4


def test_bs_13_18_reasons_are_null_elsewhere(room: LiveWorld) -> None:
    room.raw("agent-1", "hi @agent-2")
    assert room.client.get("/v1/inbox/agent-2?expand=true").json()["items"][0]["reasons"] is None
    assert room.client.get("/v1/messages?expand=true").json()["items"][0]["reasons"] is None


def test_bs_13_20_one_cursor_and_bare_stamp_prefixes(room: LiveWorld) -> None:
    room.subscribe("ideas", "agent-2", notify="all")
    room.raw("agent-1", "old", channel="ideas")
    room.timer.advance(2)
    newer = room.raw("agent-1", "new @agent-2").json()["filename"]
    page = room.client.get("/v1/updates?as=agent-2&after=20260301-120001").json()
    assert page["items"] == [newer]
    first = room.client.get("/v1/updates?as=agent-2&limit=1&order=asc").json()
    rest = room.client.get(f"/v1/updates?as=agent-2&after={first['cursor']}").json()
    assert rest["items"] == [newer]


def test_bs_13_21_missing_or_unknown_levels_read_as_mentions(room: LiveWorld) -> None:
    path = naming.channel_member_path("ideas", "agent-2")
    from agenthub.bucketsync.storage.base import Batch

    room.hub.store.write_batch(
        central(room),
        Batch(adds=[(path, b"---\nchannel: ideas\nagent: agent-2\nnotify: loud\n---\n")]),
    )
    room.hub.read_model.invalidate("channels/")
    members = room.client.get("/v1/channels/ideas").json()["members"]
    assert {m["handle"]: m["notify"] for m in members}["agent-2"] == "mentions"
    room.raw("agent-1", "quiet room", channel="ideas")
    assert _updates(room)["items"] == []


def test_bs_13_22_levels_change_by_resubscribing(room: LiveWorld) -> None:
    room.subscribe("ideas", "agent-2")
    marker_path = naming.channel_member_path("ideas", "agent-2")
    original = read(room, marker_path)
    loud = room.subscribe("ideas", "agent-2", notify="all").json()
    assert loud["changed"] is True and loud["notify"] == "all"
    patched = read(room, marker_path)
    assert patched is not None and b"notify: all" in patched
    assert original is not None
    assert original.split(b"subscribed: ")[1].split(b"\n")[0] in patched
    kept = room.subscribe("ideas", "agent-2").json()
    assert kept["changed"] is False and kept["notify"] == "all"
    bad = room.subscribe("ideas", "agent-2", notify="sometimes")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "INVALID_FRONTMATTER"
    assert read(room, marker_path) == patched


def test_bs_13_23_levels_only_affect_updates(room: LiveWorld) -> None:
    room.subscribe("ideas", "agent-2")  # notify: mentions
    posted = room.raw("agent-1", "room only", channel="ideas").json()["filename"]
    assert room.client.get("/v1/channels/feed?as=agent-2").json()["items"] == [posted]
    assert _updates(room)["items"] == []


def test_bs_13_30_digest_updates_block_counts_unread_after_the_cursor(room: LiveWorld) -> None:
    first = room.raw("agent-1", "one @agent-2").json()["filename"]
    second = room.raw("agent-1", "two @agent-2").json()["filename"]
    block = room.client.get("/v1/digest?as=agent-2").json()["updates"]
    assert block == {"unread": 2, "mentions": 2, "newest": second}
    after = room.client.get(f"/v1/digest?as=agent-2&after={first}").json()["updates"]
    assert after == {"unread": 1, "mentions": 1, "newest": second}
    assert room.client.get("/v1/digest").json()["updates"] is None


def test_bs_13_8_a_channel_post_wakes_loud_subscribers(room: LiveWorld) -> None:
    room.subscribe("ideas", "agent-2", notify="all")
    parked = room.park("/v1/updates?as=agent-2&wait=30")
    room.raw("agent-1", "news", channel="ideas")
    page = parked.result(timeout=5).json()
    assert page["watch"]["status"] == "delivered" and len(page["items"]) == 1
