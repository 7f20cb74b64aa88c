"""POST /messages/{id}/reply and GET /messages/{id}/thread."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from agenthub.clock import FrozenClock
from tests.statehub.conftest import Send, parse_ts


def test_reply_goes_to_the_original_sender_in_the_originals_thread(
    client: TestClient, send: Send
) -> None:
    original = send(from_agent="alice", to_agent="bob", subject="plan")

    response = client.post(
        f"/messages/{original['id']}/reply", json={"from_agent": "bob", "body": "agreed"}
    )

    assert response.status_code == 201
    reply = response.json()
    assert reply["from_agent"] == "bob"
    assert reply["to_agent"] == "alice"
    assert reply["body"] == "agreed"
    assert reply["thread_id"] == original["id"]
    assert reply["kind"] == "message"


def test_reply_subject_defaults_to_re_original_subject(client: TestClient, send: Send) -> None:
    original = send(subject="plan")

    first = client.post(
        f"/messages/{original['id']}/reply", json={"from_agent": "bob", "body": "x"}
    )
    second = client.post(
        f"/messages/{first.json()['id']}/reply", json={"from_agent": "alice", "body": "y"}
    )

    assert first.json()["subject"] == "Re: plan"
    assert second.json()["subject"] == "Re: plan"


def test_reply_keeps_an_explicit_subject(client: TestClient, send: Send) -> None:
    original = send(subject="plan")

    reply = client.post(
        f"/messages/{original['id']}/reply",
        json={"from_agent": "bob", "body": "x", "subject": "counter-proposal"},
    ).json()

    assert reply["subject"] == "counter-proposal"


def test_reply_to_a_reply_stays_in_the_roots_thread(client: TestClient, send: Send) -> None:
    root = send(from_agent="alice", to_agent="bob")
    first = client.post(f"/messages/{root['id']}/reply", json={"from_agent": "bob", "body": "1"})

    second = client.post(
        f"/messages/{first.json()['id']}/reply", json={"from_agent": "alice", "body": "2"}
    ).json()

    assert second["thread_id"] == root["id"]
    assert second["to_agent"] == "bob"


def test_reply_marks_a_direct_original_read(
    client: TestClient, send: Send, clock: FrozenClock
) -> None:
    original = send(to_agent="bob")
    clock.advance(5)

    client.post(f"/messages/{original['id']}/reply", json={"from_agent": "bob", "body": "ok"})

    assert parse_ts(client.get(f"/messages/{original['id']}").json()["read_at"]) == clock.now()


def test_reply_keeps_the_first_read_at_of_a_direct_original(
    client: TestClient, send: Send, clock: FrozenClock
) -> None:
    original = send(to_agent="bob")
    first_read = client.patch(f"/messages/{original['id']}/read").json()["read_at"]
    clock.advance(5)

    client.post(f"/messages/{original['id']}/reply", json={"from_agent": "bob", "body": "ok"})

    assert client.get(f"/messages/{original['id']}").json()["read_at"] == first_read


def test_reply_to_a_broadcast_marks_only_the_repliers_receipt_read(
    client: TestClient, send: Send, engine: Engine, clock: FrozenClock
) -> None:
    broadcast = send(to_agent="*")
    clock.advance(5)

    client.post(f"/messages/{broadcast['id']}/reply", json={"from_agent": "bob", "body": "ok"})

    assert client.get(f"/messages/{broadcast['id']}").json()["read_at"] is None
    with engine.connect() as conn:
        rows = conn.execute(
            text("select agent from message_receipts where read_at is not null")
        ).all()
    assert [r.agent for r in rows] == ["bob"]
    unread = {"to_agent": "bob", "unread_only": "true"}
    assert client.get("/messages/", params=unread).json() == []
    carol = client.get("/messages/", params={"to_agent": "carol", "unread_only": "true"}).json()
    assert [m["id"] for m in carol] == [broadcast["id"]]


def test_thread_returns_the_root_and_all_replies_oldest_first(
    client: TestClient, send: Send, clock: FrozenClock
) -> None:
    root = send(from_agent="alice", to_agent="bob")
    clock.advance(1)
    first = client.post(f"/messages/{root['id']}/reply", json={"from_agent": "bob", "body": "1"})
    clock.advance(1)
    second = client.post(
        f"/messages/{first.json()['id']}/reply", json={"from_agent": "alice", "body": "2"}
    )
    clock.advance(1)
    send(subject="unrelated")

    thread = client.get(f"/messages/{root['id']}/thread")

    assert thread.status_code == 200
    assert [m["id"] for m in thread.json()] == [
        root["id"],
        first.json()["id"],
        second.json()["id"],
    ]


def test_thread_of_a_reply_is_its_roots_thread(
    client: TestClient, send: Send, clock: FrozenClock
) -> None:
    root = send()
    clock.advance(1)
    reply = client.post(f"/messages/{root['id']}/reply", json={"from_agent": "bob", "body": "1"})

    thread = client.get(f"/messages/{reply.json()['id']}/thread").json()

    assert [m["id"] for m in thread] == [root["id"], reply.json()["id"]]


def test_thread_of_a_lone_message_is_just_that_message(client: TestClient, send: Send) -> None:
    message = send()

    assert client.get(f"/messages/{message['id']}/thread").json() == [message]
