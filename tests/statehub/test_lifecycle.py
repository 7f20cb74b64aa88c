"""Read marks, acknowledgements, archiving, expiry and receipts: the per-message lifecycle."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, text

from agenthub.clock import FrozenClock
from tests.statehub.conftest import AddAlias, Send, parse_ts


def receipts(engine: Engine, message_id: str) -> list[dict[str, object]]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "select agent, delivered_at, read_at, acknowledged_at from message_receipts"
                " where message_id = :m order by agent"
            ),
            {"m": message_id.replace("-", "") if engine.dialect.name == "sqlite" else message_id},
        ).mappings()
        return [dict(r) for r in rows]


# -- read -----------------------------------------------------------------------


def test_read_without_reader_sets_the_global_read_at(
    client: TestClient, send: Send, clock: FrozenClock
) -> None:
    message = send()

    response = client.patch(f"/messages/{message['id']}/read")

    assert response.status_code == 200
    assert parse_ts(response.json()["read_at"]) == clock.now()


def test_read_again_keeps_the_first_read_at(
    client: TestClient, send: Send, clock: FrozenClock
) -> None:
    message = send()
    first = client.patch(f"/messages/{message['id']}/read").json()["read_at"]
    clock.advance(60)

    again = client.patch(f"/messages/{message['id']}/read").json()["read_at"]

    assert again == first


def test_read_with_reader_on_a_direct_message_sets_the_global_read_at(
    client: TestClient, send: Send, engine: Engine, clock: FrozenClock
) -> None:
    message = send(to_agent="bob")

    read = client.patch(f"/messages/{message['id']}/read", params={"reader": "bob"}).json()

    assert parse_ts(read["read_at"]) == clock.now()
    assert receipts(engine, message["id"]) == []


def test_read_with_reader_on_a_broadcast_upserts_that_readers_receipt(
    client: TestClient, send: Send, engine: Engine, clock: FrozenClock
) -> None:
    broadcast = send(to_agent="*")

    read = client.patch(f"/messages/{broadcast['id']}/read", params={"reader": "bob"}).json()

    assert read["read_at"] is None
    [receipt] = receipts(engine, broadcast["id"])
    assert receipt["agent"] == "bob"
    assert receipt["read_at"] is not None
    assert receipt["acknowledged_at"] is None


def test_broadcast_read_by_one_reader_stays_unread_for_others(
    client: TestClient, send: Send
) -> None:
    broadcast = send(to_agent="*")

    client.patch(f"/messages/{broadcast['id']}/read", params={"reader": "bob"})

    def unread(agent: str) -> list[str]:
        params = {"to_agent": agent, "unread_only": "true"}
        return [m["id"] for m in client.get("/messages/", params=params).json()]

    assert unread("bob") == []
    assert unread("carol") == [broadcast["id"]]


def test_broadcast_receipt_read_at_is_first_write_wins(
    client: TestClient, send: Send, clock: FrozenClock
) -> None:
    broadcast = send(to_agent="*")
    client.patch(f"/messages/{broadcast['id']}/read", params={"reader": "bob"})
    first = clock.now()
    clock.advance(60)

    client.patch(f"/messages/{broadcast['id']}/read", params={"reader": "bob"})
    ack = client.post(f"/messages/{broadcast['id']}/ack", params={"agent": "bob"}).json()

    assert parse_ts(ack["read_at"]) == first
    assert parse_ts(ack["delivered_at"]) == first
    assert parse_ts(ack["acknowledged_at"]) == clock.now()


# -- ack ------------------------------------------------------------------------


def test_ack_creates_a_receipt_with_acknowledged_read_and_delivered(
    client: TestClient, send: Send, clock: FrozenClock
) -> None:
    broadcast = send(to_agent="*")

    response = client.post(f"/messages/{broadcast['id']}/ack", params={"agent": "bob"})

    assert response.status_code == 200
    receipt = response.json()
    assert receipt["message_id"] == broadcast["id"]
    assert receipt["agent"] == "bob"
    for field in ("delivered_at", "read_at", "acknowledged_at"):
        assert parse_ts(receipt[field]) == clock.now()


def test_ack_twice_keeps_the_first_acknowledged_at_and_one_row(
    client: TestClient, send: Send, engine: Engine, clock: FrozenClock
) -> None:
    broadcast = send(to_agent="*")
    first = client.post(f"/messages/{broadcast['id']}/ack", params={"agent": "bob"}).json()
    clock.advance(60)

    second = client.post(f"/messages/{broadcast['id']}/ack", params={"agent": "bob"}).json()

    assert second == first
    assert len(receipts(engine, broadcast["id"])) == 1


def test_ack_after_delivery_keeps_delivered_at_and_fills_the_rest(
    client: TestClient, send: Send, clock: FrozenClock
) -> None:
    broadcast = send(to_agent="*")
    client.get("/messages/", params={"to_agent": "bob", "unread_only": "true"})
    delivered = clock.now()
    clock.advance(60)

    ack = client.post(f"/messages/{broadcast['id']}/ack", params={"agent": "bob"}).json()

    assert parse_ts(ack["delivered_at"]) == delivered
    assert parse_ts(ack["read_at"]) == clock.now()
    assert parse_ts(ack["acknowledged_at"]) == clock.now()


def test_ack_makes_the_broadcast_read_for_that_agent(client: TestClient, send: Send) -> None:
    broadcast = send(to_agent="*")

    client.post(f"/messages/{broadcast['id']}/ack", params={"agent": "bob"})

    unread = client.get("/messages/", params={"to_agent": "bob", "unread_only": "true"}).json()
    assert unread == []


# -- archive --------------------------------------------------------------------


def test_archive_sets_archived_at_and_stamps_read_at_on_a_direct_message(
    client: TestClient, send: Send, clock: FrozenClock
) -> None:
    message = send(to_agent="bob")

    archived = client.patch(f"/messages/{message['id']}/archive")

    assert archived.status_code == 200
    assert parse_ts(archived.json()["archived_at"]) == clock.now()
    assert parse_ts(archived.json()["read_at"]) == clock.now()


def test_archive_keeps_an_earlier_read_at(
    client: TestClient, send: Send, clock: FrozenClock
) -> None:
    message = send(to_agent="bob")
    read_at = client.patch(f"/messages/{message['id']}/read").json()["read_at"]
    clock.advance(60)

    archived = client.patch(f"/messages/{message['id']}/archive").json()

    assert archived["read_at"] == read_at
    assert parse_ts(archived["archived_at"]) == clock.now()


def test_archive_of_a_broadcast_does_not_mark_it_read(client: TestClient, send: Send) -> None:
    broadcast = send(to_agent="*")

    archived = client.patch(f"/messages/{broadcast['id']}/archive").json()

    assert archived["archived_at"] is not None
    assert archived["read_at"] is None


def test_rearchiving_is_first_write_wins(
    client: TestClient, send: Send, clock: FrozenClock
) -> None:
    message = send()
    first = client.patch(f"/messages/{message['id']}/archive").json()
    clock.advance(3600)

    again = client.patch(f"/messages/{message['id']}/archive").json()

    assert again == first


def test_archived_messages_leave_the_inbox_but_stay_readable(
    client: TestClient, send: Send
) -> None:
    kept = send(subject="kept")
    gone = send(subject="gone")

    client.patch(f"/messages/{gone['id']}/archive")

    inbox = client.get("/messages/", params={"to_agent": "bob"}).json()
    assert [m["id"] for m in inbox] == [kept["id"]]
    everything = client.get(
        "/messages/", params={"to_agent": "bob", "include_archived": "true"}
    ).json()
    assert {m["id"] for m in everything} == {kept["id"], gone["id"]}
    assert client.get(f"/messages/{gone['id']}").status_code == 200


# -- expiry ---------------------------------------------------------------------


def test_expired_message_is_hidden_from_reads_but_the_row_stays(
    client: TestClient, send: Send, clock: FrozenClock
) -> None:
    message = send(expires_at=(clock.now() + timedelta(hours=1)).isoformat())
    assert len(client.get("/messages/", params={"to_agent": "bob"}).json()) == 1

    clock.advance(3600)

    assert client.get("/messages/", params={"to_agent": "bob"}).json() == []
    assert client.get("/messages/", params={"from_agent": "alice"}).json() == []
    assert client.get(f"/messages/{message['id']}").status_code == 200


def test_message_is_visible_until_just_before_expires_at(
    client: TestClient, send: Send, clock: FrozenClock
) -> None:
    send(expires_at=(clock.now() + timedelta(hours=1)).isoformat())

    clock.advance(3599)

    assert len(client.get("/messages/", params={"to_agent": "bob"}).json()) == 1


def test_news_disappears_from_the_inbox_after_30_days(
    client: TestClient, send: Send, clock: FrozenClock
) -> None:
    send(to_agent="*", kind="news")
    clock.advance(timedelta(days=30).total_seconds() - 1)
    assert len(client.get("/messages/", params={"to_agent": "bob"}).json()) == 1

    clock.advance(1)

    assert client.get("/messages/", params={"to_agent": "bob"}).json() == []


# -- aliases --------------------------------------------------------------------


def test_inbox_read_by_canonical_slug_includes_messages_sent_to_an_alias(
    client: TestClient, send: Send, add_alias: AddAlias
) -> None:
    add_alias("old-bob", "bob")
    message = send(to_agent="old-bob")

    inbox = client.get("/messages/", params={"to_agent": "bob"}).json()

    assert [m["id"] for m in inbox] == [message["id"]]
    assert inbox[0]["to_agent"] == "old-bob"


def test_inbox_read_by_alias_includes_messages_sent_to_the_canonical_slug_and_sibling_aliases(
    client: TestClient, send: Send, add_alias: AddAlias
) -> None:
    add_alias("old-bob", "bob")
    add_alias("bob-v0", "bob")
    to_canonical = send(to_agent="bob", subject="1")
    to_sibling = send(to_agent="bob-v0", subject="2")

    inbox = client.get("/messages/", params={"to_agent": "old-bob"}).json()

    assert {m["id"] for m in inbox} == {to_canonical["id"], to_sibling["id"]}


def test_sent_list_by_canonical_slug_includes_messages_from_an_alias(
    client: TestClient, send: Send, add_alias: AddAlias
) -> None:
    add_alias("old-alice", "alice")
    message = send(from_agent="old-alice")

    sent = client.get("/messages/", params={"from_agent": "alice"}).json()

    assert [m["id"] for m in sent] == [message["id"]]


def test_receipts_are_kept_under_the_canonical_slug(
    client: TestClient, send: Send, add_alias: AddAlias, engine: Engine
) -> None:
    add_alias("old-bob", "bob")
    broadcast = send(to_agent="*")

    ack = client.post(f"/messages/{broadcast['id']}/ack", params={"agent": "old-bob"}).json()

    assert ack["agent"] == "bob"
    assert [r["agent"] for r in receipts(engine, broadcast["id"])] == ["bob"]
    unread = client.get("/messages/", params={"to_agent": "bob", "unread_only": "true"}).json()
    assert unread == []


# -- how receipts are written ---------------------------------------------------


@pytest.fixture
def receipt_statements() -> Iterator[list[str]]:
    """Every SQL statement that writes message_receipts, on any engine, while the test runs."""
    seen: list[str] = []

    def capture(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if "message_receipts" in statement and not statement.lstrip().upper().startswith("SELECT"):
            seen.append(" ".join(statement.split()).upper())

    event.listen(Engine, "before_cursor_execute", capture)
    yield seen
    event.remove(Engine, "before_cursor_execute", capture)


def test_every_receipt_write_is_one_on_conflict_coalesce_upsert(
    client: TestClient, send: Send, receipt_statements: list[str]
) -> None:
    broadcast = send(to_agent="*")

    client.get("/messages/", params={"to_agent": "bob", "unread_only": "true"})
    client.patch(f"/messages/{broadcast['id']}/read", params={"reader": "bob"})
    client.post(f"/messages/{broadcast['id']}/ack", params={"agent": "bob"})
    client.post(f"/messages/{broadcast['id']}/reply", json={"from_agent": "carol", "body": "x"})

    assert len(receipt_statements) == 4
    for statement in receipt_statements:
        assert statement.startswith("INSERT INTO MESSAGE_RECEIPTS")
        assert "ON CONFLICT (MESSAGE_ID, AGENT) DO UPDATE" in statement
        assert "COALESCE(MESSAGE_RECEIPTS." in statement
