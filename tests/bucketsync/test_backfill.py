"""`backfill-inbox` (BS-7.25): offline, idempotent, same extraction as the write path."""

from __future__ import annotations

from agenthub.bucketsync.board.backfill import backfill_inbox
from agenthub.bucketsync.storage.base import Batch
from tests.bucketsync.conftest import World


def test_bs_7_25_backfill_rebuilds_missing_copies_idempotently(world: World) -> None:
    for agent in ("agent-1", "agent-2", "agent-3"):
        world.agent(agent)
    mention = world.raw("agent-1", "@agent-2 @human-zoe").json()["filename"]
    world.hub.clock.advance(1)  # type: ignore[attr-defined]
    reply = world.raw("agent-3", "re", refs=[mention]).json()["filename"]
    store, central = world.hub.store, world.hub.central
    expected = {e.path: store.read(central, e.path) for e in store.list(central, "inbox/")}
    assert set(expected) == {
        f"inbox/agent-2/{mention}",
        f"inbox/human-zoe/{mention}",
        f"inbox/agent-1/{reply}",
    }
    store.write_batch(central, Batch(deletes=list(expected)))  # a half-failed batch on HF
    # plus a historical message that predates fan-out
    old = "message_board/20260101-000000-000_agent-2.md"
    store.write_batch(central, Batch(adds=[(old, b"---\nagent: agent-2\n---\nhey @agent-3\n")]))

    report = backfill_inbox(store, central, fanout_cap=10)
    assert report.copies_written == 4
    rebuilt = {e.path: store.read(central, e.path) for e in store.list(central, "inbox/")}
    assert {p: rebuilt[p] for p in expected} == expected
    assert "inbox/agent-3/20260101-000000-000_agent-2.md" in rebuilt

    again = backfill_inbox(store, central, fanout_cap=10)
    assert again.copies_written == 0 and again.already_present == 4


def test_bs_7_25_backfill_leaves_broadcasts_alone(world: World) -> None:
    world.agent("agent-1")
    world.user("boss", role="admin")
    world.client.post(
        "/v1/messages",
        json={"agent_id": "human-boss", "body": "all @agent-1", "broadcast": True},
        headers=world.auth("boss"),
    )
    report = backfill_inbox(world.hub.store, world.hub.central, fanout_cap=10)
    assert report.broadcasts_skipped == 1 and report.copies_written == 0
