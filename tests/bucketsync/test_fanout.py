"""Inbox fan-out: recipients, mention grammar, refs, cap, same-batch copies (§7)."""

from __future__ import annotations

from agenthub.bucketsync.core import mentions
from agenthub.bucketsync.storage.base import Batch
from tests.bucketsync.conftest import World, message


def inbox_names(world: World, handle: str) -> list[str]:
    return list(world.client.get(f"/v1/inbox/{handle}?order=asc").json()["items"])


def test_bs_7_19_recipients_are_mentions_then_refs_authors_minus_author(world: World) -> None:
    for agent in ("agent-1", "agent-2", "agent-3", "agent-4"):
        world.agent(agent)
    referenced = world.raw("agent-4", "earlier").json()["filename"]
    response = world.raw(
        "agent-1",
        "@agent-3 and @agent-2, also @agent-3 again and me @agent-1",
        refs=[referenced],
    )
    assert response.json()["mentions_delivered"] == ["agent-3", "agent-2", "agent-4"]


def test_bs_7_20_mention_grammar() -> None:
    body = (
        "mail carlos@agent-1 now; @Agent-2 is shouting; @agent-3, (@agent-4) "
        "trailing @agent-5- and @all plus @human-alice"
    )
    assert mentions.mentioned_handles(body) == ["agent-3", "agent-4", "all", "human-alice"]


def test_bs_7_20_unregistered_and_all_are_dropped(world: World) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    response = world.raw("agent-1", "@all @ghost @agent-2 @human")
    assert response.json()["mentions_delivered"] == ["agent-2"]


def test_bs_1_7_human_handles_route_without_registration(world: World) -> None:
    world.agent("agent-1")
    response = world.raw("agent-1", "ping @human-alice")
    assert response.json()["mentions_delivered"] == ["human-alice"]
    assert inbox_names(world, "human-alice") == [response.json()["filename"]]


def test_bs_7_21_refs_string_or_list_only_md_and_valid_authors() -> None:
    refs = mentions.normalize_refs(
        "20260101-000000-000_agent-2.md, notes.txt 20260101-000000-000_Bad.md "
        "message_board/20260101-000000-001_agent-3.md"
    )
    assert mentions.ref_authors(refs) == ["agent-2", "agent-3"]
    assert mentions.normalize_refs(["a.md", " ", "b.md"]) == ["a.md", "b.md"]


def test_bs_5_8_fanout_capped_at_10_in_order_of_appearance(world: World) -> None:
    world.agent("agent-0")
    handles = [f"agent-{i}" for i in range(1, 13)]
    for handle in handles:
        world.agent(handle)
    response = world.raw("agent-0", " ".join(f"@{h}" for h in handles))
    assert response.json()["mentions_delivered"] == handles[:10]
    assert inbox_names(world, "agent-11") == []


def test_bs_1_14_inbox_copy_is_byte_identical(world: World) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    filename = world.promote("agent-1", "m.md", message("hey @agent-2", type="q")).json()[
        "filename"
    ]
    central = world.hub.central
    board = world.hub.store.read(central, f"message_board/{filename}")
    copy = world.hub.store.read(central, f"inbox/agent-2/{filename}")
    assert board is not None and board == copy


class RecordingStore:
    """Wraps the real local store and records each batch write."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.batches: list[tuple[str, Batch]] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def write_batch(self, bucket: str, batch: Batch) -> None:
        self.batches.append((bucket, batch))
        self.inner.write_batch(bucket, batch)  # type: ignore[attr-defined]


def test_bs_7_22_fanout_same_batch_copies_first_board_last(world: World) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    world.agent("agent-3")
    recorder = RecordingStore(world.hub.store)
    world.hub.store = recorder  # type: ignore[assignment]
    filename = world.raw("agent-1", "@agent-2 @agent-3").json()["filename"]
    central = [batch for bucket, batch in recorder.batches if bucket == world.hub.central]
    assert len(central) == 1
    assert [path for path, _ in central[0].adds] == [
        f"inbox/agent-2/{filename}",
        f"inbox/agent-3/{filename}",
        f"message_board/{filename}",
    ]


def test_bs_7_23_inboxes_are_public_and_unknown_agents_404(world: World) -> None:
    world.agent("agent-1")
    assert world.client.get("/v1/inbox/agent-1").status_code == 200
    assert world.client.get("/v1/inbox/human-nobody").status_code == 200
    missing = world.client.get("/v1/inbox/ghost")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "NOT_REGISTERED"
    assert world.client.get("/v1/inbox/human").status_code == 404


def test_bs_7_24_canonical_polling_loop_returns_only_new_items(world: World) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    first = world.raw("agent-1", "one @agent-2").json()["filename"]
    page = world.client.get("/v1/inbox/agent-2?expand=true").json()
    assert [item["filename"] for item in page["items"]] == [first]
    cursor = page["cursor"]
    world.hub.clock.advance(1)  # type: ignore[attr-defined]
    second = world.raw("agent-1", "two @agent-2").json()["filename"]
    world.raw("agent-1", "not for agent-2")
    page = world.client.get(f"/v1/inbox/agent-2?after={cursor}&expand=true").json()
    assert [item["filename"] for item in page["items"]] == [second]
    assert page["cursor"] == second
    empty = world.client.get(f"/v1/inbox/agent-2?after={second}&expand=true").json()
    assert empty["items"] == [] and empty["cursor"] is None


def test_bs_7_26_broadcasts_merge_into_every_inbox_at_read_time(world: World) -> None:
    world.agent("agent-1")
    world.user("boss", role="admin")
    response = world.client.post(
        "/v1/messages",
        json={"agent_id": "human-boss", "body": "all hands", "broadcast": True},
        headers=world.auth("boss"),
    )
    assert response.status_code == 201
    filename = response.json()["filename"]
    assert response.json()["mentions_delivered"] == []
    world.agent("agent-late")  # registered after the broadcast
    for handle in ("agent-1", "agent-late", "human-never-seen", "human-boss"):
        assert inbox_names(world, handle) == [filename], handle
    assert world.hub.store.list(world.hub.central, "inbox/") == []


def test_bs_11_1_non_admin_humans_cannot_broadcast(world: World) -> None:
    world.user("carol")
    response = world.client.post(
        "/v1/messages",
        json={"agent_id": "human-carol", "body": "all hands", "broadcast": True},
        headers=world.auth("carol"),
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "NOT_ORGANIZER"


def test_fanout_wakes_the_notifier_after_the_write(world: World) -> None:
    world.agent("agent-1")
    world.agent("agent-2")
    seen: list[frozenset[str]] = []

    def listener(keys: frozenset[str]) -> None:
        # The wake comes after write-through: the woken reader already sees the copy.
        assert inbox_names(world, "agent-2")
        seen.append(keys)

    world.hub.notifier.subscribe(listener)  # type: ignore[union-attr]
    world.raw("agent-1", "@agent-2")
    world.raw("agent-1", "nobody")
    assert seen == [frozenset({"inbox:agent-2"})]
