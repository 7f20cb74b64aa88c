"""POST /messages/: sending direct messages and broadcasts, kinds, TTLs, threads, supersession."""

from __future__ import annotations

import uuid
from datetime import timedelta

from fastapi.testclient import TestClient

from agenthub.clock import FrozenClock
from agenthub.statehub.settings import StateHubSettings
from tests.statehub.conftest import Send, parse_ts


def test_send_returns_201_and_the_stored_message(client: TestClient, clock: FrozenClock) -> None:
    response = client.post(
        "/messages/",
        json={"from_agent": "alice", "to_agent": "bob", "subject": "plan", "body": "ship it"},
    )

    assert response.status_code == 201
    message = response.json()
    assert uuid.UUID(message["id"])
    assert message["from_agent"] == "alice"
    assert message["to_agent"] == "bob"
    assert message["subject"] == "plan"
    assert message["body"] == "ship it"
    assert message["kind"] == "message"
    assert message["thread_id"] is None
    assert message["supersedes_id"] is None
    assert message["read_at"] is None
    assert message["archived_at"] is None
    assert message["expires_at"] is None
    assert parse_ts(message["created_at"]) == clock.now()
    assert client.get(f"/messages/{message['id']}").json() == message


def test_send_to_star_is_a_broadcast_in_every_inbox(client: TestClient, send: Send) -> None:
    broadcast = send(to_agent="*", subject="all hands")

    for agent in ("bob", "carol", "zed-9"):
        inbox = client.get("/messages/", params={"to_agent": agent}).json()
        assert [m["id"] for m in inbox] == [broadcast["id"]]


def test_direct_message_is_only_in_its_recipients_inbox(client: TestClient, send: Send) -> None:
    message = send(to_agent="bob")

    assert [m["id"] for m in client.get("/messages/", params={"to_agent": "bob"}).json()] == [
        message["id"]
    ]
    assert client.get("/messages/", params={"to_agent": "carol"}).json() == []


def test_news_expires_after_the_default_ttl_of_30_days(send: Send, clock: FrozenClock) -> None:
    news = send(to_agent="*", kind="news")

    assert parse_ts(news["expires_at"]) == clock.now() + timedelta(days=30)


def test_news_keeps_an_expiry_the_sender_gives(send: Send, clock: FrozenClock) -> None:
    expires = clock.now() + timedelta(hours=2)

    news = send(to_agent="*", kind="news", expires_at=expires.isoformat())

    assert parse_ts(news["expires_at"]) == expires


def test_news_ttl_follows_statehub_news_ttl_days(
    settings: StateHubSettings, clock: FrozenClock
) -> None:
    settings = settings.model_copy(update={"news_ttl_days": 3})
    from agenthub.statehub.app import create_app

    with TestClient(create_app(settings, clock=clock)) as client:
        news = client.post(
            "/messages/",
            json={"from_agent": "a", "to_agent": "*", "subject": "s", "body": "b", "kind": "news"},
        ).json()

    assert parse_ts(news["expires_at"]) == clock.now() + timedelta(days=3)


def test_other_kinds_never_expire_unless_asked(send: Send) -> None:
    assert send(kind="message")["expires_at"] is None
    assert send(kind="alert")["expires_at"] is None


def test_a_naive_expires_at_is_read_as_utc(send: Send) -> None:
    message = send(expires_at="2026-03-01T12:00:00")

    assert message["expires_at"] in ("2026-03-01T12:00:00Z", "2026-03-01T12:00:00+00:00")


def test_thread_id_naming_a_root_links_the_message_to_it(send: Send) -> None:
    root = send()

    follow_up = send(thread_id=root["id"])

    assert follow_up["thread_id"] == root["id"]


def test_thread_id_naming_a_reply_links_to_that_replys_root(send: Send) -> None:
    root = send()
    reply = send(thread_id=root["id"])

    follow_up = send(thread_id=reply["id"])

    assert follow_up["thread_id"] == root["id"]


def test_broadcast_superseding_another_archives_the_predecessor(
    client: TestClient, send: Send, clock: FrozenClock
) -> None:
    old = send(to_agent="*", subject="v1")
    clock.advance(60)

    new = send(to_agent="*", subject="v2", supersedes_id=old["id"])

    assert new["supersedes_id"] == old["id"]
    predecessor = client.get(f"/messages/{old['id']}").json()
    assert parse_ts(predecessor["archived_at"]) == clock.now()
    inbox = client.get("/messages/", params={"to_agent": "bob"}).json()
    assert [m["id"] for m in inbox] == [new["id"]]


def test_superseding_an_archived_broadcast_keeps_its_first_archived_at(
    client: TestClient, send: Send, clock: FrozenClock
) -> None:
    old = send(to_agent="*")
    first_archive = client.patch(f"/messages/{old['id']}/archive").json()["archived_at"]
    clock.advance(60)

    send(to_agent="*", supersedes_id=old["id"])

    assert client.get(f"/messages/{old['id']}").json()["archived_at"] == first_archive


def test_supersedes_id_naming_no_message_is_rejected_and_nothing_is_written(
    client: TestClient,
) -> None:
    response = client.post(
        "/messages/",
        json={
            "from_agent": "alice",
            "to_agent": "*",
            "subject": "v2",
            "body": "b",
            "supersedes_id": str(uuid.uuid4()),
        },
    )

    assert response.status_code == 422
    assert "supersedes_id" in response.json()["detail"]
    assert response.json()["hint"]
    assert client.get("/messages/", params={"to_agent": "bob"}).json() == []
