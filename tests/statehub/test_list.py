"""GET /messages/: filters, ordering, limits, and the delivery stamp of `unread_only`."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from agenthub.clock import FrozenClock
from tests.statehub.conftest import Send, parse_ts


def ids(response: Any) -> list[str]:
    assert response.status_code == 200, response.text
    return [m["id"] for m in response.json()]


def delivered(engine: Engine) -> dict[str, Any]:
    """agent → delivered_at of every receipt (one broadcast per test)."""
    with engine.connect() as conn:
        rows = conn.execute(text("select agent, delivered_at from message_receipts")).all()
    return {r.agent: r.delivered_at for r in rows}


def test_inbox_is_newest_first(client: TestClient, send: Send, clock: FrozenClock) -> None:
    first = send(subject="1")
    clock.advance(1)
    second = send(subject="2")
    clock.advance(1)
    third = send(to_agent="*", subject="3")

    assert ids(client.get("/messages/", params={"to_agent": "bob"})) == [
        third["id"],
        second["id"],
        first["id"],
    ]


def test_messages_created_at_the_same_instant_are_ordered_by_id_descending(
    client: TestClient, send: Send
) -> None:
    sent = [send(subject=str(n))["id"] for n in range(5)]

    assert ids(client.get("/messages/", params={"to_agent": "bob"})) == sorted(sent, reverse=True)


def test_limit_returns_the_newest_n(client: TestClient, send: Send, clock: FrozenClock) -> None:
    sent = []
    for n in range(4):
        sent.append(send(subject=str(n))["id"])
        clock.advance(1)

    assert ids(client.get("/messages/", params={"to_agent": "bob", "limit": 2})) == [
        sent[3],
        sent[2],
    ]


def test_limit_defaults_to_50(client: TestClient, send: Send) -> None:
    for n in range(51):
        send(subject=str(n))

    assert len(ids(client.get("/messages/", params={"to_agent": "bob"}))) == 50


def test_from_agent_alone_lists_a_senders_messages(client: TestClient, send: Send) -> None:
    mine = send(from_agent="alice", to_agent="bob")
    broadcast = send(from_agent="alice", to_agent="*")
    send(from_agent="carol", to_agent="bob")

    assert set(ids(client.get("/messages/", params={"from_agent": "alice"}))) == {
        mine["id"],
        broadcast["id"],
    }


def test_to_and_from_agent_together_narrow_the_inbox(client: TestClient, send: Send) -> None:
    from_alice = send(from_agent="alice", to_agent="bob")
    send(from_agent="carol", to_agent="bob")

    response = client.get("/messages/", params={"to_agent": "bob", "from_agent": "alice"})

    assert ids(response) == [from_alice["id"]]


def test_kind_filters_the_inbox(client: TestClient, send: Send) -> None:
    news = send(to_agent="*", kind="news")
    send(to_agent="bob", kind="message")

    assert ids(client.get("/messages/", params={"to_agent": "bob", "kind": "news"})) == [news["id"]]


def test_unread_only_hides_read_direct_messages(client: TestClient, send: Send) -> None:
    read = send(subject="read")
    unread = send(subject="unread")
    client.patch(f"/messages/{read['id']}/read")

    response = client.get("/messages/", params={"to_agent": "bob", "unread_only": "true"})

    assert ids(response) == [unread["id"]]


def test_unread_only_stamps_delivered_at_on_the_readers_broadcast_receipts(
    client: TestClient, send: Send, engine: Engine, clock: FrozenClock
) -> None:
    broadcast = send(to_agent="*")
    clock.advance(10)

    response = client.get("/messages/", params={"to_agent": "bob", "unread_only": "true"})

    assert ids(response) == [broadcast["id"]]
    stamps = delivered(engine)
    assert list(stamps) == ["bob"]
    assert stamps["bob"] is not None


def test_delivery_does_not_make_a_broadcast_read(
    client: TestClient, send: Send, engine: Engine
) -> None:
    broadcast = send(to_agent="*")
    params = {"to_agent": "bob", "unread_only": "true"}

    client.get("/messages/", params=params)

    assert ids(client.get("/messages/", params=params)) == [broadcast["id"]]


def test_the_first_delivery_stamp_is_kept(
    client: TestClient, send: Send, clock: FrozenClock
) -> None:
    broadcast = send(to_agent="*")
    params = {"to_agent": "bob", "unread_only": "true"}
    client.get("/messages/", params=params)
    first = clock.now()
    clock.advance(60)

    client.get("/messages/", params=params)

    ack = client.post(f"/messages/{broadcast['id']}/ack", params={"agent": "bob"}).json()
    assert parse_ts(ack["delivered_at"]) == first


def test_a_plain_list_stamps_nothing(client: TestClient, send: Send, engine: Engine) -> None:
    send(to_agent="*")

    client.get("/messages/", params={"to_agent": "bob"})

    assert delivered(engine) == {}


def test_unread_only_stamps_only_the_broadcasts_it_returns(
    client: TestClient, send: Send, engine: Engine, clock: FrozenClock
) -> None:
    older = send(to_agent="*", subject="older")
    clock.advance(1)
    newer = send(to_agent="*", subject="newer")
    archived = send(to_agent="*", subject="archived")
    client.patch(f"/messages/{archived['id']}/archive")

    response = client.get(
        "/messages/", params={"to_agent": "bob", "unread_only": "true", "limit": 1}
    )

    assert ids(response) == [newer["id"]]
    with engine.connect() as conn:
        stamped: int = conn.execute(text("select count(*) from message_receipts")).scalar_one()
    assert stamped == 1
    assert ids(client.get("/messages/", params={"to_agent": "carol"})) == [
        newer["id"],
        older["id"],
    ]


def test_unread_only_does_not_stamp_direct_messages(
    client: TestClient, send: Send, engine: Engine
) -> None:
    send(to_agent="bob")

    client.get("/messages/", params={"to_agent": "bob", "unread_only": "true"})

    assert delivered(engine) == {}


def test_include_archived_defaults_to_false(client: TestClient, send: Send) -> None:
    message = send()
    client.patch(f"/messages/{message['id']}/archive")

    assert ids(client.get("/messages/", params={"to_agent": "bob"})) == []
    assert ids(
        client.get("/messages/", params={"to_agent": "bob", "include_archived": "true"})
    ) == [message["id"]]


def test_get_returns_one_message(client: TestClient, send: Send) -> None:
    message = send()

    response = client.get(f"/messages/{message['id']}")

    assert response.status_code == 200
    assert response.json() == message
