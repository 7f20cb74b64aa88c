"""Feed pages built by hand (plain dicts, as State Hub serves them) for the applier's rules."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from agenthub.hubcore import feedrepo
from agenthub.hubcore.canonical import parse_timestamp
from agenthub.hubcore.models import ProjectedMessage, SourceCursor
from agenthub.hubcore.repository import message_row
from agenthub.hubcore.store import Database
from tests.hubcore.bundles import message, receipt, ts, uid

SOURCE = "hub-a"
EPOCH = "epoch-1"
CONTRACT = "statehub.inbox-feed.v1"


def m(n: int, rev: int, **fields: Any) -> dict[str, Any]:
    return {"revision": rev, "entity": "message", "key": uid(n), "op": "upsert",
            "state": message(n, revision=rev, **fields)}  # fmt: skip


def r(n: int, agent: str, rev: int, **fields: Any) -> dict[str, Any]:
    return {"revision": rev, "entity": "receipt", "key": f"{uid(n)}:{agent}", "op": "upsert",
            "state": receipt(n, agent, revision=rev, **fields)}  # fmt: skip


def r_del(n: int, agent: str, rev: int) -> dict[str, Any]:
    state = {"message_id": uid(n), "agent": agent, "revision": rev, "deleted_at": ts(500 + rev)}
    return {"revision": rev, "entity": "receipt", "key": f"{uid(n)}:{agent}", "op": "delete",
            "state": state}  # fmt: skip


def t(n: int, rev: int) -> dict[str, Any]:
    state = {"message_id": uid(n), "revision": rev, "deleted_at": ts(500 + rev), "reason": None}
    return {"revision": rev, "entity": "tombstone", "key": uid(n), "op": "delete", "state": state}


def page(
    *changes: dict[str, Any],
    after: int = 0,
    high_water: int | None = None,
    has_more: bool = False,
    source: str = SOURCE,
    epoch: str = EPOCH,
    source_time: str | None = None,
) -> dict[str, Any]:
    last = max((c["revision"] for c in changes), default=after)
    return {
        "contract": CONTRACT,
        "source_instance": source,
        "source_epoch": epoch,
        "source_time": source_time or ts(1000 + last),
        "high_water": f"v1:{last if high_water is None else high_water}",
        "compacted_before": "v1:0",
        "next_cursor": f"v1:{last}",
        "has_more": has_more,
        "changes": list(changes),
    }


def start_cursor(db: Database, cursor: int = 0) -> None:
    """A projection that follows `hub-a` from `cursor` (as a snapshot import leaves it)."""
    with db.write() as session:
        session.add(
            SourceCursor(
                source_instance=SOURCE,
                cursor=f"v1:{cursor}",
                high_water=f"v1:{cursor}",
                last_source_time=parse_timestamp(ts(0)),
                last_success_at=parse_timestamp(ts(0)),
                mode="live",
                content_hash="",
                source_epoch=EPOCH,
            )
        )


def messages(db: Database) -> dict[str, dict[str, Any]]:
    with db.read_only() as session:
        return {str(x.id): message_row(x) for x in session.scalars(select(ProjectedMessage))}


def cursor_of(db: Database) -> SourceCursor:
    with db.read_only() as session:
        found = feedrepo.the_cursor(session)
    assert found is not None
    return found
