"""Building bundles by hand for the import rules: rows, bundles, and re-hashing after edits."""

from __future__ import annotations

import copy
import tracemalloc
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from agenthub.hubcore.canonical import (
    canonical_timestamp,
    receipts_hash,
    snapshot_hash,
    tombstones_hash,
)
from agenthub.hubcore.capture import build_bundle

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def ts(minutes: float) -> str:
    return canonical_timestamp(T0 + timedelta(minutes=minutes), "t")


def uid(n: int) -> str:
    return str(uuid.UUID(int=n))


def message(n: int, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": uid(n),
        "from_agent": "alice",
        "to_agent": "state-hub",
        "subject": f"subject {n}",
        "body": f"body {n}",
        "thread_id": None,
        "read_at": None,
        "archived_at": None,
        "kind": "message",
        "expires_at": None,
        "supersedes_id": None,
        "created_at": ts(n),
        "revision": 0,
    }
    row.update(fields)
    return row


def receipt(n: int, agent: str, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "message_id": uid(n),
        "agent": agent,
        "delivered_at": ts(n + 1),
        "read_at": None,
        "acknowledged_at": None,
        "revision": 0,
    }
    row.update(fields)
    return row


def bundle(
    messages: list[dict[str, Any]],
    receipts: list[dict[str, Any]] | None = None,
    tombstones: list[dict[str, Any]] | None = None,
    instance: str = "statehub-test",
) -> dict[str, Any]:
    return build_bundle(
        source={
            "instance": instance,
            "cursor": "v1:0",
            "source_time": ts(1000),
            "captured_by": "tests",
            "via": "hand-built",
        },
        captured_at=T0 + timedelta(days=1),
        messages=messages,
        receipts=receipts or [],
        tombstones=tombstones or [],
    )


def inbox_bundle() -> dict[str, Any]:
    """A small inbox: a thread, a broadcast read by state-hub, one unread broadcast, an archive."""
    return bundle(
        [
            message(1, subject="root"),
            message(2, from_agent="bob", to_agent="alice", thread_id=uid(1)),
            message(3, to_agent="*", from_agent="ops"),
            message(4, to_agent="*", from_agent="ops"),
            message(5, archived_at=ts(6), read_at=ts(6)),
            message(7, from_agent="bob", read_at=ts(8)),
        ],
        [receipt(3, "state-hub", read_at=ts(4)), receipt(4, "bob", read_at=ts(5))],
    )


def rehash(b: dict[str, Any]) -> dict[str, Any]:
    """Make counts and hashes agree with the (edited) rows, so only the rule under test trips."""
    out = copy.deepcopy(b)
    out["count"] = len(out["messages"])
    out["content_hash"] = snapshot_hash(out["messages"])
    out["receipts_count"] = len(out["receipts"])
    out["receipts_hash"] = receipts_hash(out["receipts"])
    out["tombstones_count"] = len(out["tombstones"])
    out["tombstones_hash"] = tombstones_hash(out["tombstones"])
    return out


def peak_traced_mb(action: Callable[[], object]) -> float:
    """The most memory Python held at once (tracemalloc, MB) while `action` ran."""
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()
