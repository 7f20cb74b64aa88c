"""The HTTP feed's pages are encoded apart from the dict pages (`change_json`: by the
database on PostgreSQL); they must say exactly what the Python-shaped page says, and a
value in a stored form State Hub does not write must still go out canonical."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, text

from agenthub.clock import FrozenClock
from agenthub.statehub.feed import FeedService
from agenthub.statehub.models import MessageReceipt
from agenthub.statehub.store import Database
from tests.statehub.test_feed import busy_inbox, raw_delete, send


def _feed(client: TestClient) -> FeedService:
    service: FeedService = client.app.state.feed  # type: ignore[attr-defined]
    return service


def _timeless(page: dict[str, Any]) -> dict[str, Any]:
    """A page without `source_time` (PostgreSQL's clock at each read)."""
    return {k: v for k, v in page.items() if k != "source_time"}


def _every_kind_of_change(client: TestClient, clock: FrozenClock, db: Database) -> None:
    made = busy_inbox(client, clock)
    send(client, clock, subject='quote " and \\ backslash', body="é ü 漢字 \n\t\u0001 end")
    raw_delete(db, made["reply"]["id"], reason="operator")
    with db.write() as session:  # a receipt delete while its message lives
        session.execute(
            delete(MessageReceipt).where(
                MessageReceipt.message_id == uuid.UUID(made["newer"]["id"]),
                MessageReceipt.agent == "carol",
            )
        )


@pytest.mark.parametrize("limit", [1, 2, 3, 500])
def test_an_encoded_page_says_what_the_shaped_page_says(
    client: TestClient, clock: FrozenClock, db: Database, limit: int
) -> None:
    _every_kind_of_change(client, clock, db)
    service = _feed(client)
    after, seen = "v1:0", set()
    while True:
        shaped = service.page(after, limit)
        encoded = service.encoded_page(after, limit)
        assert _timeless(orjson.loads(encoded.body)) == _timeless(shaped)
        assert encoded.changes == len(shaped["changes"])
        seen |= {(c["entity"], c["op"]) for c in shaped["changes"]}
        if not shaped["has_more"]:
            break
        after = shaped["next_cursor"]
    assert seen == {
        ("message", "upsert"),
        ("receipt", "upsert"),
        ("receipt", "delete"),
        ("tombstone", "delete"),
    }


def test_the_route_serves_the_encoded_page(client: TestClient, clock: FrozenClock) -> None:
    send(client, clock)
    response = client.get("/messages/feed", params={"after": "v1:0"})
    assert response.status_code == 200
    assert _timeless(response.json()) == _timeless(_feed(client).page("v1:0"))


# Only SQLite keeps ids and timestamps as text another tool could have written.
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_timestamp_in_another_stored_form_is_served_canonical(
    client: TestClient, clock: FrozenClock, db: Database
) -> None:
    message = send(client, clock)
    with db.engine.begin() as conn:  # as another tool might have written it
        conn.execute(
            text("UPDATE agent_messages SET created_at = '2026-01-02T03:04:05+00:00'"),
        )
    service = _feed(client)
    page = orjson.loads(service.encoded_page("v1:0").body)
    assert page == service.page("v1:0")
    assert page["changes"][0]["state"]["id"] == message["id"]
    assert page["changes"][0]["state"]["created_at"] == "2026-01-02T03:04:05.000000Z"
