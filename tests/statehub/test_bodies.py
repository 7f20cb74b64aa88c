"""The inbox routes' orjson bodies are byte for byte what `MessageRead` would have made."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from agenthub.clock import FrozenClock
from agenthub.statehub.api.bodies import message_fields, message_json, messages_json
from agenthub.statehub.inbox import InboxService, ListQuery
from agenthub.statehub.schemas import MessageRead, ReceiptRead
from tests.statehub.conftest import Send

LISTED = TypeAdapter(list[MessageRead])


def _pydantic_list(rows: list[Any]) -> bytes:
    return LISTED.dump_json([MessageRead.model_validate(r) for r in rows])


def _varied_inbox(send: Send, clock: FrozenClock) -> None:
    """Every field filled and empty, timestamps with and without microseconds, text
    that JSON escapes."""
    root = send(subject='quote " backslash \\ tab \t', body="é 😀 \u2028 \x01 <>&")
    clock.advance(0.123456)
    send(thread_id=root["id"], expires_at="2030-01-01T00:00:00Z")
    clock.advance(1)
    first = send(to_agent="*", kind="news", subject="news 1")
    clock.advance(0.5)
    send(to_agent="*", kind="news", subject="news 2", supersedes_id=first["id"])
    send(expires_at="2031-06-01T12:30:00.000001+02:00", subject="offset")


def test_a_listed_page_is_pydantics_encoding(
    client: TestClient, send: Send, clock: FrozenClock
) -> None:
    _varied_inbox(send, clock)
    service: InboxService = client.app.state.inbox  # type: ignore[attr-defined]
    client.patch(f"/messages/{send()['id']}/read")
    for params in (
        {"to_agent": "bob", "include_archived": "true"},
        {"to_agent": "bob", "unread_only": "true"},
        {"from_agent": "alice", "kind": "news", "include_archived": "true"},
    ):
        response = client.get("/messages/", params=params)
        assert response.status_code == 200, response.text
        query = ListQuery(
            to_agent=params.get("to_agent"),
            from_agent=params.get("from_agent"),
            kind=params.get("kind"),
            unread_only="unread_only" in params,
            include_archived="include_archived" in params,
            peek=True,
        )
        rows = service.list_messages(query)
        assert len(rows) >= 2
        assert response.content == _pydantic_list(rows)


def test_a_sent_message_is_pydantics_encoding(client: TestClient, send: Send) -> None:
    response = client.post(
        "/messages/",
        json={
            "from_agent": "alice",
            "to_agent": "*",
            "subject": "s",
            "body": "b",
            "expires_at": "2030-01-01T00:00:00Z",
        },
    )
    assert response.status_code == 201, response.text
    service: InboxService = client.app.state.inbox  # type: ignore[attr-defined]
    stored = service.get(uuid.UUID(response.json()["id"]))
    assert response.content == MessageRead.model_validate(stored).model_dump_json().encode()
    assert message_json(stored) == response.content


def test_a_reply_and_an_ack_are_pydantics_encoding(client: TestClient, send: Send) -> None:
    # Both answer with `answer_of`'s bytes (what an Idempotency-Key stores with the write),
    # no longer through `response_model`; the wire stays what pydantic made.
    original = send(subject='quote " é \u2028 \x01')
    reply = client.post(
        f"/messages/{original['id']}/reply", json={"from_agent": "bob", "body": "é 😀 \t"}
    )
    ack = client.post(f"/messages/{original['id']}/ack", params={"agent": "bob"})
    assert (reply.status_code, ack.status_code) == (201, 200)
    service: InboxService = client.app.state.inbox  # type: ignore[attr-defined]
    stored = service.get(uuid.UUID(reply.json()["id"]))
    assert reply.content == MessageRead.model_validate(stored).model_dump_json().encode()
    receipt = ReceiptRead.model_validate(ack.json())
    assert ack.content == receipt.model_dump_json().encode()


def test_the_comparison_catches_an_encoder_that_drifts(
    client: TestClient, send: Send, clock: FrozenClock
) -> None:
    # The broken variant: orjson without OPT_UTC_Z writes "+00:00" for UTC.
    _varied_inbox(send, clock)
    service: InboxService = client.app.state.inbox  # type: ignore[attr-defined]
    rows = service.list_messages(ListQuery(to_agent="bob", peek=True))
    drifted = orjson.dumps([message_fields(r) for r in rows])
    assert drifted != _pydantic_list(rows)
    assert messages_json(rows) == _pydantic_list(rows)


@pytest.mark.parametrize("text", ["\ud800 lone surrogate"])
def test_a_value_orjson_refuses_takes_pydantics_path(text: str) -> None:
    # orjson refuses a lone surrogate; pydantic decides what happens to it, as before.
    row = MessageRead(
        id=uuid.uuid4(),
        from_agent="a",
        to_agent="b",
        subject=text,
        body="b",
        thread_id=None,
        read_at=None,
        archived_at=None,
        kind="message",
        expires_at=None,
        supersedes_id=None,
        created_at=FrozenClock().now(),
    )
    with pytest.raises(ValueError) as ours:
        messages_json([row])
    with pytest.raises(ValueError) as theirs:
        LISTED.dump_json([row])
    assert str(ours.value) == str(theirs.value)
