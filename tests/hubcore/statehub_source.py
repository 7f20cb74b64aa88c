"""A real State Hub as the capture source: a realistic inbox written through its HTTP API,
and a small real HTTP server serving that database as `GET /messages/feed/snapshot`.

The snapshot route is being added to State Hub on `main` at the time of writing;
until it lands, `feed_snapshot_app` serves the contract's exact shape (§2, §8)
from a real State Hub database so `capture --from-statehub` is exercised over HTTP.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from typing import Any, Protocol

from fastapi import FastAPI
from sqlalchemy import select, text

from agenthub.clock import FrozenClock
from agenthub.db import make_engine
from agenthub.statehub.instance import stored_instance_label
from agenthub.statehub.models import AgentMessage, MessageReceipt
from agenthub.statehub.store import Database

READER = "state-hub"


class HttpClient(Protocol):
    def post(self, url: str, **kwargs: Any) -> Any: ...
    def patch(self, url: str, **kwargs: Any) -> Any: ...


def _ok(response: Any) -> dict[str, Any]:
    assert response.status_code in (200, 201), response.text
    body: dict[str, Any] = response.json()
    return body


def populate(client: HttpClient, clock: FrozenClock) -> dict[str, str]:
    """Write a realistic `state-hub` inbox; return the ids worth naming in assertions."""

    def send(**fields: Any) -> str:
        clock.advance(1)
        return str(_ok(client.post("/messages/", json=fields))["id"])

    ids: dict[str, str] = {}
    ids["plan"] = send(from_agent="alice", to_agent=READER, subject="plan", body="the plan body")
    clock.advance(1)
    ids["plan_reply"] = str(
        _ok(
            client.post(f"/messages/{ids['plan']}/reply", json={"from_agent": READER, "body": "ok"})
        )["id"]
    )
    clock.advance(1)
    ids["plan_followup"] = str(
        _ok(
            client.post(
                f"/messages/{ids['plan_reply']}/reply", json={"from_agent": "alice", "body": "thx"}
            )
        )["id"]
    )
    ids["freeze_v1"] = send(from_agent="ops", to_agent="*", subject="freeze", body="freeze v1")
    _ok(client.patch(f"/messages/{ids['freeze_v1']}/read", params={"reader": READER}))
    ids["freeze_v2"] = send(
        from_agent="ops",
        to_agent="*",
        subject="freeze",
        body="freeze v2",
        supersedes_id=ids["freeze_v1"],
    )
    ids["runner"] = send(from_agent="ops", to_agent="*", subject="runner", body="new runner")
    _ok(client.post(f"/messages/{ids['runner']}/ack", params={"agent": "bob"}))
    ids["read_broadcast"] = send(from_agent="ops", to_agent="*", subject="notice", body="notice")
    _ok(client.patch(f"/messages/{ids['read_broadcast']}/read", params={"reader": READER}))
    ids["replied_broadcast"] = send(from_agent="carol", to_agent="*", subject="poll", body="poll")
    clock.advance(1)
    _ok(
        client.post(
            f"/messages/{ids['replied_broadcast']}/reply",
            json={"from_agent": READER, "body": "yes"},
        )
    )
    ids["archived"] = send(from_agent="bob", to_agent=READER, subject="old", body="old news")
    _ok(client.patch(f"/messages/{ids['archived']}/archive"))
    ids["read_direct"] = send(from_agent="bob", to_agent=READER, subject="fyi", body="fyi body")
    _ok(client.patch(f"/messages/{ids['read_direct']}/read"))
    expiry = (clock.now() + timedelta(minutes=30)).isoformat()
    ids["expiring"] = send(
        from_agent="carol",
        to_agent=READER,
        subject="short",
        body="brief",
        kind="news",
        expires_at=expiry,
    )
    ids["news"] = send(from_agent="carol", to_agent=READER, subject="weekly", body="n", kind="news")
    # Two messages in the same instant: the order falls back to the id.
    clock.advance(1)
    ids["tie_a"] = str(
        _ok(
            client.post(
                "/messages/",
                json={"from_agent": "dave", "to_agent": READER, "subject": "tie", "body": "a"},
            )
        )["id"]
    )
    ids["tie_b"] = str(
        _ok(
            client.post(
                "/messages/",
                json={"from_agent": "dave", "to_agent": READER, "subject": "tie", "body": "b"},
            )
        )["id"]
    )
    ids["outgoing"] = send(from_agent=READER, to_agent="alice", subject="out", body="outgoing")
    for n in range(5):
        ids[f"bulk{n}"] = send(
            from_agent="alice" if n % 2 else "dave", to_agent=READER, subject=f"bulk {n}", body="x"
        )
    return ids


def _ts(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def feed_snapshot(url: str, *, now: datetime) -> dict[str, Any]:
    """The contract's snapshot of a State Hub database, read in one consistent transaction."""
    engine = make_engine(url)
    try:
        db = Database(engine)
        instance = stored_instance_label(db)
        with db.read() as session:
            if engine.dialect.name == "postgresql":
                session.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"))
            messages = [
                {
                    "id": str(m.id),
                    "from_agent": m.from_agent,
                    "to_agent": m.to_agent,
                    "subject": m.subject,
                    "body": m.body,
                    "thread_id": None if m.thread_id is None else str(m.thread_id),
                    "read_at": _ts(m.read_at),
                    "archived_at": _ts(m.archived_at),
                    "kind": m.kind,
                    "expires_at": _ts(m.expires_at),
                    "supersedes_id": None if m.supersedes_id is None else str(m.supersedes_id),
                    "created_at": _ts(m.created_at),
                    "revision": 0,
                }
                for m in session.scalars(select(AgentMessage).order_by(AgentMessage.id))
            ]
            receipts = [
                {
                    "message_id": str(r.message_id),
                    "agent": r.agent,
                    "delivered_at": _ts(r.delivered_at),
                    "read_at": _ts(r.read_at),
                    "acknowledged_at": _ts(r.acknowledged_at),
                    "revision": 0,
                }
                for r in session.scalars(
                    select(MessageReceipt).order_by(MessageReceipt.message_id, MessageReceipt.agent)
                )
            ]
    finally:
        engine.dispose()
    body = {"messages": messages, "receipts": receipts, "tombstones": []}
    digest = hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    return {
        "contract": "statehub.inbox-feed.v1",
        "source_instance": instance,
        "source_epoch": "epoch-1",
        "source_time": _ts(now),
        "cursor": "v1:0",
        "compacted_before": "v1:0",
        **body,
        "count": len(messages),
        "content_hash": digest,
    }


def feed_snapshot_app(url: str, clock: FrozenClock, *, contract: str | None = None) -> FastAPI:
    app = FastAPI()

    @app.get("/messages/feed/snapshot")
    def snapshot() -> dict[str, Any]:
        body = feed_snapshot(url, now=clock.now())
        if contract is not None:
            body["contract"] = contract
        return body

    return app
