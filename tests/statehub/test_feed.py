"""The change feed contract (statehub.inbox-feed.v1, §7 list) on SQLite and PostgreSQL,
direct and through pgbouncer in transaction pooling mode."""

from __future__ import annotations

import sqlite3
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, text, update
from sqlalchemy.engine import make_url

from agenthub.clock import FrozenClock
from agenthub.statehub.models import AgentMessage, MessageReceipt, MessageTombstone
from agenthub.statehub.store import Database
from tests.statehub.conftest import WITH_PGBOUNCER, statehub_database
from tests.statehub.feed_image import Image, same_rows


@pytest.fixture(params=WITH_PGBOUNCER)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The contract holds on SQLite, PostgreSQL, and PostgreSQL through pgbouncer."""
    return statehub_database(request, tmp_path)


def send(client: TestClient, clock: FrozenClock, **fields: Any) -> dict[str, Any]:
    body = {"from_agent": "alice", "to_agent": "bob", "subject": "s", "body": "b", **fields}
    response = client.post("/messages/", json=body)
    assert response.status_code == 201, response.text
    clock.advance(1)
    return dict(response.json())


def feed(client: TestClient, after: str = "v1:0", **params: Any) -> dict[str, Any]:
    response = client.get("/messages/feed", params={"after": after, **params})
    assert response.status_code == 200, response.text
    return dict(response.json())


def follow(client: TestClient, image: Image, limit: int = 500) -> Image:
    while True:
        page = feed(client, image.cursor, limit=limit)
        image.apply(page)
        if not page["has_more"]:
            return image


def snapshot(client: TestClient) -> dict[str, Any]:
    response = client.get("/messages/feed/snapshot")
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    return dict(response.json())


def changes_by_key(page: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{c['entity']}:{c['op']}:{c['key']}": c for c in page["changes"]}


def raw_delete(db: Database, message_id: str, reason: str | None = None) -> None:
    """A delete no route can do: SQL straight at the table, as an operator would."""
    with db.write() as session:
        if reason is not None:
            if db.sqlite:
                session.execute(
                    text("UPDATE inbox_revision_state SET delete_reason = :r"), {"r": reason}
                )
            else:
                session.execute(
                    text("SELECT set_config('statehub.delete_reason', :r, true)"), {"r": reason}
                )
        session.execute(delete(AgentMessage).where(AgentMessage.id == uuid.UUID(message_id)))


def busy_inbox(client: TestClient, clock: FrozenClock) -> dict[str, dict[str, Any]]:
    """Every kind of change the inbox can make."""
    direct = send(client, clock)
    news = send(client, clock, to_agent="*", kind="news", subject="release")
    newer = send(client, clock, to_agent="*", subject="v2", supersedes_id=news["id"])
    reply = client.post(f"/messages/{direct['id']}/reply", json={"from_agent": "bob", "body": "ok"})
    client.patch(f"/messages/{newer['id']}/read", params={"reader": "carol"})
    client.post(f"/messages/{newer['id']}/ack", params={"agent": "dave"})
    client.get("/messages/", params={"to_agent": "erin", "unread_only": True})
    client.patch(f"/messages/{direct['id']}/archive")
    return {"direct": direct, "news": news, "newer": newer, "reply": reply.json()}


# -- parity, revisions, no-ops ---------------------------------------------------


def test_replaying_the_feed_from_zero_converges_on_the_snapshot(
    client: TestClient, clock: FrozenClock, db: Database
) -> None:
    made = busy_inbox(client, clock)
    raw_delete(db, made["reply"]["id"])

    image = follow(client, Image(), limit=2)
    snap = snapshot(client)

    assert same_rows(image, snap)
    assert image.content_hash() == snap["content_hash"]
    assert image.cursor == snap["cursor"] == snap["high_water"]
    assert snap["count"] == len(snap["messages"]) == 3


def test_snapshot_carries_every_contract_field(client: TestClient, clock: FrozenClock) -> None:
    send(client, clock)
    snap = snapshot(client)
    for name in (
        "contract", "source_instance", "source_epoch", "source_time", "cursor",
        "compacted_before", "messages", "receipts", "tombstones", "count", "content_hash",
    ):  # fmt: skip
        assert name in snap
    assert snap["contract"] == "statehub.inbox-feed.v1"
    assert snap["source_instance"] == "test-hub"
    assert set(snap["messages"][0]) >= {"id", "body", "kind", "expires_at", "revision"}


def test_supersession_is_one_revision_holding_both_rows(
    client: TestClient, clock: FrozenClock
) -> None:
    old = send(client, clock, to_agent="*")
    cursor = feed(client)["next_cursor"]
    new = send(client, clock, to_agent="*", supersedes_id=old["id"])

    page = feed(client, cursor)

    assert {c["key"] for c in page["changes"]} == {old["id"], new["id"]}
    assert len({c["revision"] for c in page["changes"]}) == 1
    archived = next(c for c in page["changes"] if c["key"] == old["id"])
    assert archived["state"]["archived_at"] is not None


def test_reply_to_a_broadcast_is_one_revision_with_the_receipt(
    client: TestClient, clock: FrozenClock
) -> None:
    broadcast = send(client, clock, to_agent="*")
    cursor = feed(client)["next_cursor"]
    client.post(f"/messages/{broadcast['id']}/reply", json={"from_agent": "bob", "body": "hi"})

    page = feed(client, cursor)

    assert [c["entity"] for c in page["changes"]] == ["message", "receipt"]
    assert len({c["revision"] for c in page["changes"]}) == 1


@pytest.mark.parametrize(
    "repeat",
    [
        pytest.param(lambda c, m: c.get("/messages/", params={"to_agent": "bob", "unread_only": True}), id="stamping-read"),
        pytest.param(lambda c, m: c.post(f"/messages/{m}/ack", params={"agent": "bob"}), id="ack"),
        pytest.param(lambda c, m: c.patch(f"/messages/{m}/read", params={"reader": "bob"}), id="read"),
        pytest.param(lambda c, m: c.patch(f"/messages/{m}/archive"), id="archive"),
    ],
)  # fmt: skip
def test_repeating_a_write_makes_no_new_revision(
    client: TestClient, clock: FrozenClock, repeat: Any
) -> None:
    broadcast = send(client, clock, to_agent="*")
    repeat(client, broadcast["id"])
    clock.advance(5)
    before = feed(client)["high_water"]

    repeat(client, broadcast["id"])

    assert feed(client)["high_water"] == before
    assert feed(client, before)["changes"] == []


# -- deletes and tombstones --------------------------------------------------------


def test_raw_sql_delete_writes_a_tombstone_and_nulls_references_in_the_same_revision(
    client: TestClient, clock: FrozenClock, db: Database
) -> None:
    root = send(client, clock, to_agent="*")
    reply = client.post(f"/messages/{root['id']}/reply", json={"from_agent": "bob", "body": "x"})
    successor = send(client, clock, to_agent="*", supersedes_id=root["id"])
    cursor = feed(client)["next_cursor"]

    raw_delete(db, root["id"], reason="operator cleanup")
    page = feed(client, cursor)

    by_key = changes_by_key(page)
    tombstone = by_key[f"tombstone:delete:{root['id']}"]
    assert tombstone["state"]["reason"] == "operator cleanup"
    assert by_key[f"message:upsert:{reply.json()['id']}"]["state"]["thread_id"] is None
    assert by_key[f"message:upsert:{successor['id']}"]["state"]["supersedes_id"] is None
    assert len({c["revision"] for c in page["changes"]}) == 1
    # The cascade dropped bob's receipt; the message tombstone covers it.
    assert not any(c["entity"] == "receipt" for c in page["changes"])
    assert [c["entity"] for c in page["changes"]][-1] == "tombstone"


def test_delete_from_an_outside_session_still_writes_a_tombstone(
    client: TestClient, clock: FrozenClock, database_url: str, db: Database
) -> None:
    """What an operator types into `sqlite3` or `psql`: no State Hub code involved."""
    message = send(client, clock, to_agent="*")
    client.post(f"/messages/{message['id']}/ack", params={"agent": "bob"})
    cursor = feed(client)["next_cursor"]

    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        shell = sqlite3.connect(url.database or "")  # foreign_keys off, as in the shell
        shell.execute("DELETE FROM agent_messages WHERE id = ?", (uuid.UUID(message["id"]).hex,))
        shell.commit()
        shell.close()
    else:
        with db.engine.connect() as conn:
            conn.execute(delete(AgentMessage).where(AgentMessage.id == uuid.UUID(message["id"])))
            conn.commit()

    page = feed(client, cursor)
    assert [c["entity"] for c in page["changes"]] == ["tombstone"]
    with db.read() as session:
        assert session.query(MessageReceipt).count() == 0
    image = follow(client, Image())
    assert same_rows(image, snapshot(client))


def test_direct_receipt_delete_reaches_consumers(
    client: TestClient, clock: FrozenClock, db: Database
) -> None:
    message = send(client, clock, to_agent="*")
    client.post(f"/messages/{message['id']}/ack", params={"agent": "bob"})
    image = follow(client, Image())
    assert len(image.receipts) == 1

    with db.write() as session:
        session.execute(delete(MessageReceipt))
    page = feed(client, image.cursor)

    assert [(c["entity"], c["op"]) for c in page["changes"]] == [("receipt", "delete")]
    image.apply(page)
    assert image.receipts == {}
    assert same_rows(image, snapshot(client))


def test_cursor_older_than_the_tombstone_horizon_gets_410(
    client: TestClient, clock: FrozenClock, db: Database
) -> None:
    first = send(client, clock)
    second = send(client, clock)
    raw_delete(db, first["id"])
    old_cursor = "v1:0"
    horizon_revision = feed(client)["high_water"]
    with db.write() as session:
        session.execute(
            update(MessageTombstone).values(deleted_at=clock.now() - timedelta(days=91))
        )
    raw_delete(db, second["id"])  # recent: still served

    gone = client.get("/messages/feed", params={"after": old_cursor})
    page = feed(client, horizon_revision)
    snap = snapshot(client)

    assert gone.status_code == 410
    assert gone.json()["resnapshot_required"] is True
    assert gone.headers["cache-control"] == "no-store"
    assert page["compacted_before"] == horizon_revision == snap["compacted_before"]
    assert [t["message_id"] for t in snap["tombstones"]] == [second["id"]]
    with db.read() as session:  # enforced logically: nothing purged
        assert session.query(MessageTombstone).count() == 2


# -- paging --------------------------------------------------------------------------


def test_a_page_never_splits_a_revision(client: TestClient, clock: FrozenClock) -> None:
    send(client, clock)
    old = send(client, clock, to_agent="*")
    new = send(client, clock, to_agent="*", supersedes_id=old["id"])
    after_first = feed(client, limit=1)

    page = feed(client, after_first["next_cursor"], limit=1)

    assert len(after_first["changes"]) == 1
    assert {c["key"] for c in page["changes"]} == {old["id"], new["id"]}
    assert page["has_more"] is False


def test_changes_within_a_revision_come_messages_then_receipts_then_tombstones(
    client: TestClient, clock: FrozenClock, db: Database
) -> None:
    target = send(client, clock, to_agent="*")
    other = send(client, clock, to_agent="*")
    cursor = feed(client)["next_cursor"]
    with db.write() as session:  # one transaction: an archive, a receipt, a delete
        session.execute(
            update(AgentMessage)
            .where(AgentMessage.id == uuid.UUID(other["id"]))
            .values(archived_at=clock.now())
        )
        session.add(
            MessageReceipt(message_id=uuid.UUID(other["id"]), agent="zed", read_at=clock.now())
        )
        session.flush()
        session.execute(delete(AgentMessage).where(AgentMessage.id == uuid.UUID(target["id"])))

    page = feed(client, cursor)

    assert [c["entity"] for c in page["changes"]] == ["message", "receipt", "tombstone"]


def test_replaying_a_page_returns_the_same_changes(client: TestClient, clock: FrozenClock) -> None:
    busy_inbox(client, clock)

    first, again = feed(client, limit=3), feed(client, limit=3)

    assert first["changes"] == again["changes"]
    assert first["next_cursor"] == again["next_cursor"]


def test_empty_page_is_a_heartbeat(client: TestClient, clock: FrozenClock) -> None:
    send(client, clock)
    head = feed(client)["high_water"]

    page = feed(client, head)

    assert page["changes"] == []
    assert page["next_cursor"] == head
    assert page["has_more"] is False
    for name in ("source_time", "high_water", "source_instance", "source_epoch"):
        assert page[name]


def test_feed_sends_no_store_and_health_reports_high_water(
    client: TestClient, clock: FrozenClock
) -> None:
    send(client, clock)
    response = client.get("/messages/feed", params={"after": "v1:0"})
    assert response.headers["cache-control"] == "no-store"
    assert client.get("/state/health").json()["high_water"] == response.json()["high_water"]


# -- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cursor", ["", "abc", "v1:", "v1:-1", "v1:1.5", "v1: 1", "1", "v1:99999999999999999999"]
)
def test_malformed_cursor_is_400(client: TestClient, cursor: str) -> None:
    response = client.get("/messages/feed", params={"after": cursor})
    assert response.status_code == 400
    assert response.json()["code"] == "malformed_cursor"
    assert "hint" in response.json()


def test_cursor_of_another_contract_version_is_409(client: TestClient) -> None:
    response = client.get("/messages/feed", params={"after": "v2:0"})
    assert response.status_code == 409
    assert response.json()["resnapshot_required"] is True


def test_cursor_from_another_instance_is_409(client: TestClient) -> None:
    response = client.get("/messages/feed", params={"after": "v1:0", "source_instance": "other"})
    assert response.status_code == 409
    assert response.json()["resnapshot_required"] is True


def test_cursor_ahead_of_high_water_is_409(client: TestClient, clock: FrozenClock) -> None:
    send(client, clock)
    high = int(feed(client)["high_water"].split(":")[1])
    response = client.get("/messages/feed", params={"after": f"v1:{high + 1}"})
    assert response.status_code == 409


def test_another_source_epoch_is_409(client: TestClient) -> None:
    epoch = feed(client)["source_epoch"]
    assert (
        client.get("/messages/feed", params={"after": "v1:0", "source_epoch": epoch}).status_code
        == 200
    )
    response = client.get("/messages/feed", params={"after": "v1:0", "source_epoch": epoch + "x"})
    assert response.status_code == 409


@pytest.mark.parametrize("limit", [0, 5001, -1])
def test_limit_outside_1_to_5000_is_422(client: TestClient, limit: int) -> None:
    assert client.get("/messages/feed", params={"after": "v1:0", "limit": limit}).status_code == 422


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize("path", ["/messages/feed", "/messages/feed/snapshot"])
def test_feed_routes_are_get_only(client: TestClient, method: str, path: str) -> None:
    assert client.request(method, path).status_code == 405
