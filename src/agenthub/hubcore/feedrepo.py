"""SQL the follower needs: keyed loads and batched writes of projection rows, the
cursor row, and the closure check. Callers own the transaction; nothing here commits."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Iterator, Sequence
from datetime import datetime
from functools import cache
from typing import Any, TypeVar, cast

from sqlalchemy import (
    CompoundSelect,
    Select,
    String,
    Table,
    bindparam,
    delete,
    insert,
    literal,
    select,
    tuple_,
    union_all,
)
from sqlalchemy import Row as SqlRow
from sqlalchemy import cast as sql_cast
from sqlalchemy.orm import Session, aliased

from agenthub.hubcore.canonical import Row, canonical_timestamp, canonical_uuid, parse_timestamp
from agenthub.hubcore.errors import FeedRefused
from agenthub.hubcore.models import (
    ProjectedMessage,
    ProjectedReceipt,
    ProjectedReceiptTombstone,
    ProjectedTombstone,
    SourceCursor,
)
from agenthub.hubcore.repository import (
    message_params,
    message_row,
    receipt_params,
    receipt_row,
    tombstone_params,
)

CHUNK = 500
T = TypeVar("T")
# Core tables: batched writes skip the ORM's per-row bookkeeping.
MESSAGES = cast(Table, ProjectedMessage.__table__)
RECEIPTS = cast(Table, ProjectedReceipt.__table__)
TOMBSTONES = cast(Table, ProjectedTombstone.__table__)
RECEIPT_TOMBSTONES = cast(Table, ProjectedReceiptTombstone.__table__)


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _split(key: str) -> tuple[uuid.UUID, str]:
    message_id, _, agent = key.partition(":")
    return uuid.UUID(message_id), agent


def tombstone_row(t: ProjectedTombstone | SqlRow[Any]) -> Row:
    return {
        "message_id": canonical_uuid(t.message_id),
        "revision": t.revision,
        "deleted_at": canonical_timestamp(t.deleted_at, "deleted_at"),
    }


def receipt_tombstone_row(t: ProjectedReceiptTombstone | SqlRow[Any]) -> Row:
    return {
        "message_id": canonical_uuid(t.message_id),
        "agent": t.agent,
        "revision": t.revision,
        "deleted_at": canonical_timestamp(t.deleted_at, "deleted_at"),
    }


def receipt_tombstone_params(row: Row) -> dict[str, Any]:
    return {
        "message_id": uuid.UUID(row["message_id"]),
        "agent": row["agent"],
        "revision": row["revision"],
        "deleted_at": parse_timestamp(row["deleted_at"]),
    }


# -- keyed loads --------------------------------------------------------------------
# Core rows, not ORM objects: the loaded rows are only read (into canonical form).


def load_messages(session: Session, ids: Iterable[str]) -> dict[str, Row]:
    keys = list({uuid.UUID(i) for i in ids})
    found: dict[str, Row] = {}
    for part in chunks(keys):
        for m in session.execute(select(MESSAGES).where(MESSAGES.c.id.in_(part))):
            found[canonical_uuid(m.id)] = message_row(m)
    return found


def load_tombstones(session: Session, ids: Iterable[str]) -> dict[str, Row]:
    keys = list({uuid.UUID(i) for i in ids})
    found: dict[str, Row] = {}
    for part in chunks(keys):
        stmt = select(TOMBSTONES).where(TOMBSTONES.c.message_id.in_(part))
        for t in session.execute(stmt):
            found[canonical_uuid(t.message_id)] = tombstone_row(t)
    return found


def load_receipts(session: Session, keys: Iterable[str]) -> dict[str, Row]:
    pairs = list({_split(k) for k in keys})
    found: dict[str, Row] = {}
    columns = tuple_(RECEIPTS.c.message_id, RECEIPTS.c.agent)
    for part in chunks(pairs):
        for r in session.execute(select(RECEIPTS).where(columns.in_(part))):
            found[f"{canonical_uuid(r.message_id)}:{r.agent}"] = receipt_row(r)
    return found


def load_receipt_tombstones(session: Session, keys: Iterable[str]) -> dict[str, Row]:
    pairs = list({_split(k) for k in keys})
    found: dict[str, Row] = {}
    table = RECEIPT_TOMBSTONES
    columns = tuple_(table.c.message_id, table.c.agent)
    for part in chunks(pairs):
        for t in session.execute(select(table).where(columns.in_(part))):
            found[f"{canonical_uuid(t.message_id)}:{t.agent}"] = receipt_tombstone_row(t)
    return found


# -- batched writes -----------------------------------------------------------------


def write_messages(session: Session, final: dict[str, Row | None], stored: set[str]) -> None:
    """Make each named message exactly `final[id]` (None: absent); `stored` are those
    that exist now (only they need deleting first)."""
    table = MESSAGES
    ids = [uuid.UUID(k) for k in final if k in stored]
    for part in chunks(ids):
        session.execute(delete(table).where(table.c.id.in_(part)))
    rows = [message_params(r) for r in final.values() if r is not None]
    for batch in chunks(rows, 5000):
        session.execute(insert(table), list(batch))


def drop_receipts_of(session: Session, message_ids: Iterable[str]) -> None:
    ids = list({uuid.UUID(i) for i in message_ids})
    for part in chunks(ids):
        session.execute(delete(ProjectedReceipt).where(ProjectedReceipt.message_id.in_(part)))


def write_receipts(session: Session, final: dict[str, Row | None], stored: set[str]) -> None:
    table = RECEIPTS
    pairs = [_split(k) for k in final if k in stored]
    columns = tuple_(table.c.message_id, table.c.agent)
    for part in chunks(pairs):
        session.execute(delete(table).where(columns.in_(part)))
    rows = [receipt_params(r) for r in final.values() if r is not None]
    for batch in chunks(rows, 5000):
        session.execute(insert(table), list(batch))


def write_tombstones(session: Session, final: dict[str, Row], stored: set[str]) -> None:
    table = TOMBSTONES
    ids = [uuid.UUID(k) for k in final if k in stored]
    for part in chunks(ids):
        session.execute(delete(table).where(table.c.message_id.in_(part)))
    rows = [tombstone_params(r) for r in final.values()]
    for batch in chunks(rows, 5000):
        session.execute(insert(table), list(batch))


def write_receipt_tombstones(session: Session, final: dict[str, Row], stored: set[str]) -> None:
    table = RECEIPT_TOMBSTONES
    pairs = [_split(k) for k in final if k in stored]
    columns = tuple_(table.c.message_id, table.c.agent)
    for part in chunks(pairs):
        session.execute(delete(table).where(columns.in_(part)))
    rows = [receipt_tombstone_params(r) for r in final.values()]
    for batch in chunks(rows, 5000):
        session.execute(insert(table), list(batch))


# -- cursor -------------------------------------------------------------------------


def the_cursor(session: Session) -> SourceCursor | None:
    """The projection's one cursor row (a projection follows one source)."""
    rows = list(session.scalars(select(SourceCursor).order_by(SourceCursor.source_instance)))
    if len(rows) > 1:
        raise FeedRefused(
            "several_sources",
            "the projection holds cursors for several sources",
            rows=[r.source_instance for r in rows],
            hint="a hub-core database follows one State Hub; re-snapshot into an empty one",
        )
    return rows[0] if rows else None


def record_error(session: Session, message: str, now: datetime) -> None:
    cursor = the_cursor(session)
    if cursor is not None:
        cursor.last_error = message[:2000]
        cursor.last_error_at = now


# -- closure ------------------------------------------------------------------------


def closure_violations(session: Session, limit: int = 20) -> list[str]:
    """Rows naming a message the projection does not hold: replies without their
    root, supersessions without their target, receipts without their message.

    One statement (the three anti-joins, each limited, in a UNION ALL): it runs at every
    checkpoint, which while following live is every page, so its round trips are
    replication lag."""
    return _closure_findings(session.execute(_closure_statement(limit)), limit)


def closure_violations_near(
    session: Session,
    *,
    written: Collection[str],
    removed: Collection[str],
    receipts_of: Collection[str],
    limit: int = 20,
) -> list[str]:
    """`closure_violations` for a projection that was closed before one page changed
    it: only what that page can have broken is looked at.

    From a closed projection, a page breaks closure only through a row it wrote
    (`written` messages, receipts of the messages in `receipts_of`) naming a message
    that is not there, or through a message it `removed` that a remaining row still
    names. Each is an anti-join reached through an index from the page's own keys,
    so the cost follows the page, not the projection (the full check reads every
    row: 170 ms at 200,000 messages on PostgreSQL, on every live page). The findings
    are the full check's over such a projection (`tests/hubcore/test_closure_near.py`)."""
    params = {
        "written": _uuids(written),
        "removed": _uuids(removed),
        "receipts_of": _uuids({*receipts_of, *removed}),
    }
    present = tuple(name for name, keys in params.items() if keys)
    if not present:
        return []
    stmt = _near_statement(present, limit)
    return _closure_findings(session.execute(stmt, {n: params[n] for n in present}), limit)


@cache
def _near_statement(present: tuple[str, ...], limit: int) -> CompoundSelect[str, str, str]:
    """`closure_violations_near`'s statement for the key lists a page has (`present`),
    built once per shape: building it cost as much as running it."""
    branches = []
    for field in ("thread_id", "supersedes_id"):
        column = getattr(ProjectedMessage, field)
        if "written" in present:
            written = ProjectedMessage.id.in_(bindparam("written", expanding=True))
            branches.append(_messages_naming_absent(field, limit, written))
        if "removed" in present:
            removed = column.in_(bindparam("removed", expanding=True))
            branches.append(_messages_naming_absent(field, limit, removed))
    if "receipts_of" in present:
        receipts_of = ProjectedReceipt.message_id.in_(bindparam("receipts_of", expanding=True))
        branches.append(_receipts_of_absent(limit, receipts_of))
    return _union(branches)


def _uuids(keys: Collection[str]) -> list[uuid.UUID]:
    return sorted({uuid.UUID(k) for k in keys})


def _closure_findings(rows: Iterable[Any], limit: int) -> list[str]:
    """The closure check's findings, grouped by kind in a fixed order, each kind
    without repeats and cut at `limit`."""
    problems: dict[str, dict[str, None]] = {"thread_id": {}, "supersedes_id": {}, "receipt": {}}
    for kind, a, b in rows:
        if kind == "receipt":
            finding = f"receipt {canonical_uuid(a)}:{b}"
        else:
            finding = f"{canonical_uuid(a)} {kind}->{canonical_uuid(b)}"
        found = problems[kind]
        if len(found) < limit:
            found[finding] = None
    return [p for kind in problems for p in problems[kind]]


@cache
def _closure_statement(limit: int) -> CompoundSelect[str, str, str]:
    """Built once: constructing the aliased anti-joins cost more than running them
    on a small projection (about a millisecond per live page)."""
    return _union(
        [
            _messages_naming_absent("thread_id", limit),
            _messages_naming_absent("supersedes_id", limit),
            _receipts_of_absent(limit),
        ]
    )


# The closure check's anti-joins, each as (kind, a, b) and cut at `limit`, optionally
# narrowed by `where`; a full check takes them whole, a near check near a page's keys.


def _messages_naming_absent(field: str, limit: int, *where: Any) -> Select[str, str, str]:
    """Messages whose `field` names a message the projection does not hold."""
    target = aliased(ProjectedMessage)
    column = getattr(ProjectedMessage, field)
    return (
        select(
            literal(field).label("kind"),
            sql_cast(ProjectedMessage.id, String).label("a"),
            sql_cast(column, String).label("b"),
        )
        .outerjoin(target, target.id == column)
        .where(*where, column.is_not(None), target.id.is_(None))
        .limit(limit)
    )


def _receipts_of_absent(limit: int, *where: Any) -> Select[str, str, str]:
    """Receipts whose message the projection does not hold."""
    target = aliased(ProjectedMessage)
    return (
        select(
            literal("receipt").label("kind"),
            sql_cast(ProjectedReceipt.message_id, String).label("a"),
            ProjectedReceipt.agent.label("b"),
        )
        .outerjoin(target, target.id == ProjectedReceipt.message_id)
        .where(*where, target.id.is_(None))
        .limit(limit)
    )


def _union(branches: Sequence[Select[str, str, str]]) -> CompoundSelect[str, str, str]:
    # Each branch a subquery: a LIMIT inside UNION ALL needs one on SQLite.
    subqueries = [b.subquery() for b in branches]
    return union_all(*(select(q.c.kind, q.c.a, q.c.b) for q in subqueries))
