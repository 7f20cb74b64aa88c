"""`GET /messages/?unread_only=true&peek=true`: look at the unread set without consuming it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from agenthub.clock import FrozenClock
from tests.statehub.conftest import Send

PEEK = {"to_agent": "bob", "unread_only": "true", "peek": "true"}
READ = {"to_agent": "bob", "unread_only": "true"}


def receipts(engine: Engine) -> list[tuple[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(text("select agent, delivered_at from message_receipts")).all()
    return [(r.agent, r.delivered_at) for r in rows]


def ids(response: Any) -> list[str]:
    assert response.status_code == 200, response.text
    return [m["id"] for m in response.json()]


def test_peek_returns_the_unread_set_and_stamps_nothing(
    client: TestClient, send: Send, engine: Engine, clock: FrozenClock
) -> None:
    direct = send()
    clock.advance(1)
    broadcast = send(to_agent="*")

    assert ids(client.get("/messages/", params=PEEK)) == [broadcast["id"], direct["id"]]
    assert ids(client.get("/messages/", params=PEEK)) == [broadcast["id"], direct["id"]]
    assert receipts(engine) == []


def test_the_same_read_without_peek_stamps_delivered_at(
    client: TestClient, send: Send, engine: Engine
) -> None:
    # The contrast: the only difference from the test above is `peek`.
    send(to_agent="*")

    client.get("/messages/", params=READ)

    [(agent, stamp)] = receipts(engine)
    assert agent == "bob" and stamp is not None


def test_peek_leaves_an_existing_delivery_stamp_as_it_was(
    client: TestClient, send: Send, engine: Engine, clock: FrozenClock
) -> None:
    send(to_agent="*")
    client.get("/messages/", params=READ)
    before = receipts(engine)
    clock.advance(60)

    client.get("/messages/", params=PEEK)

    assert receipts(engine) == before


def test_a_peek_then_a_read_delivers_at_the_read(
    client: TestClient, send: Send, engine: Engine, clock: FrozenClock
) -> None:
    broadcast = send(to_agent="*")
    client.get("/messages/", params=PEEK)
    clock.advance(30)

    read = client.get("/messages/", params=READ).json()

    assert [m["id"] for m in read] == [broadcast["id"]]
    [(_, stamp)] = receipts(engine)
    assert stamp is not None
    when = stamp if isinstance(stamp, datetime) else datetime.fromisoformat(stamp)
    assert when.replace(tzinfo=None) == clock.now().replace(tzinfo=None)


def test_a_peek_adds_nothing_to_the_change_feed_and_a_read_does(
    client: TestClient, send: Send
) -> None:
    # Followers (hub-core) see the feed: a peek that wrote would reach them as a change.
    send(to_agent="*")
    head = client.get("/messages/feed", params={"after": "v1:0"}).json()["next_cursor"]

    client.get("/messages/", params=PEEK)
    after_peek = client.get("/messages/feed", params={"after": head}).json()
    client.get("/messages/", params=READ)
    after_read = client.get("/messages/feed", params={"after": head}).json()

    assert after_peek["changes"] == [] and after_peek["next_cursor"] == head
    assert [change["entity"] for change in after_read["changes"]] == ["receipt"]
