"""Helpers for follower tests against a real State Hub: writes, raw deletes, and the
two images (State Hub's snapshot, hub-core's projection) in one comparable form."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import delete, select, update

from agenthub.clock import SystemClock
from agenthub.db import make_engine
from agenthub.hubcore import repository as repo
from agenthub.hubcore.apply import ApplyResult
from agenthub.hubcore.feedclient import HttpFeedSource
from agenthub.hubcore.follower import Follower, FollowOptions
from agenthub.hubcore.store import Database
from agenthub.statehub.models import AgentMessage, MessageTombstone
from agenthub.statehub.store import Database as StateHubDatabase

Image = tuple[dict[str, Any], dict[str, Any], dict[str, Any]]


def ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code in (200, 201), response.text
    body: dict[str, Any] = response.json()
    return body


def send(client: httpx.Client, to: str = "operator", **fields: Any) -> str:
    body = {"from_agent": "alice", "to_agent": to, "subject": "s", "body": "b", **fields}
    return str(ok(client.post("/messages/", json=body))["id"])


def statehub_image(client: httpx.Client) -> Image:
    snap = ok(client.get("/messages/feed/snapshot"))
    return (
        {m["id"]: m for m in snap["messages"]},
        {f"{r['message_id']}:{r['agent']}": r for r in snap["receipts"]},
        {
            t["message_id"]: {k: v for k, v in t.items() if k != "reason"}
            for t in snap["tombstones"]
        },
    )


def hubcore_image(db: Database) -> Image:
    with db.read_only() as session:
        return (
            {m["id"]: m for m in repo.stored_messages(session)},
            {f"{r['message_id']}:{r['agent']}": r for r in repo.stored_receipts(session)},
            {t["message_id"]: t for t in repo.stored_tombstones(session)},
        )


def raw_delete(statehub_url: str, message_id: str) -> None:
    """A delete no route can do: SQL straight at State Hub's table, as an operator would."""
    engine = make_engine(statehub_url)
    try:
        with StateHubDatabase(engine).write() as session:
            session.execute(delete(AgentMessage).where(AgentMessage.id == uuid.UUID(message_id)))
    finally:
        engine.dispose()


def age_tombstones(statehub_url: str, days: int = 91) -> None:
    """Push every tombstone past State Hub's 90-day horizon (as time would)."""
    engine = make_engine(statehub_url)
    try:
        with engine.begin() as conn:
            conn.execute(
                update(MessageTombstone).values(deleted_at=datetime.now(UTC) - timedelta(days=days))
            )
    finally:
        engine.dispose()


def tombstone_ids(statehub_url: str) -> list[str]:
    engine = make_engine(statehub_url)
    try:
        with engine.connect() as conn:
            return [str(i) for i in conn.execute(select(MessageTombstone.message_id)).scalars()]
    finally:
        engine.dispose()


def follower(db: Database, base_url: str, **options: Any) -> Follower:
    opts = FollowOptions(**({"limit": 3, "wait_s": 0, "snapshot_page_size": 4} | options))
    return Follower(db, HttpFeedSource(base_url), SystemClock(), opts)


def catch_up(f: Follower) -> ApplyResult:
    async def run() -> ApplyResult:
        try:
            return await f.catch_up()
        finally:
            await f.source.aclose()

    return asyncio.run(run())


def step(f: Follower) -> Any:
    async def run() -> Any:
        try:
            return await f.step(wait=0)
        finally:
            await f.source.aclose()

    return asyncio.run(run())
