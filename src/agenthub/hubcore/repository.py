"""SQL over the projection tables. Callers own the transaction; nothing here commits."""

from __future__ import annotations

import heapq
import itertools
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from functools import cache
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    Select,
    String,
    Table,
    bindparam,
    exists,
    func,
    insert,
    not_,
    or_,
    select,
    text,
)
from sqlalchemy import Row as SqlRow
from sqlalchemy.orm import InstrumentedAttribute, Session, aliased

from agenthub.hubcore.canonical import (
    Row,
    canonical_timestamp,
    canonical_uuid,
    parse_timestamp,
)
from agenthub.hubcore.models import (
    ProjectedMessage,
    ProjectedReceipt,
    ProjectedTombstone,
    SourceCursor,
)
from agenthub.hubcore.schemas import MessageRead
from agenthub.sqltypes import UTCDateTime

BROADCAST = "*"
# The columns an inbox read answers with: `MessageRead`'s fields, in its order.
INBOX_COLUMNS = tuple(
    cast(Table, ProjectedMessage.__table__).c[name] for name in MessageRead.model_fields
)
INSERT_BATCH = 5_000
PROJECTION_TABLES = (
    "projected_messages",
    "projected_receipts",
    "projected_tombstones",
    "projected_receipt_tombstones",
    "source_cursors",
    "staged_snapshot_rows",
)


def lock_projection(session: Session, *, wait_for_flush: bool = True) -> None:
    """Serialize importers on PostgreSQL before anything is inspected.

    EXCLUSIVE mode still lets readers in (they take ACCESS SHARE) but makes a
    second importer wait until this transaction ends, so two imports can never
    both see an empty receiver. SQLite gets the same effect from BEGIN IMMEDIATE.

    `wait_for_flush=False` (a live feed page): the commit returns before its WAL
    is flushed. The copy is derived and a page's rows commit with the cursor that
    names them, so a crash that loses the commit leaves the old rows and the old
    cursor, and the follower asks for the page again; the flush was most of a live
    page's commit. Set in the lock's own round trip.
    """
    if session.get_bind().dialect.name == "postgresql":
        lock = f"LOCK TABLE {', '.join(PROJECTION_TABLES)} IN EXCLUSIVE MODE"
        if not wait_for_flush:
            lock = "SET LOCAL synchronous_commit = off; " + lock
        session.execute(text(lock))


def refresh_statistics(session: Session) -> None:
    """Give the planner fresh statistics after a bulk import.

    Without them PostgreSQL guesses a handful of rows and bitmap-scans and sorts
    the whole inbox (about 40 ms at 100k messages instead of about 3 ms).
    """
    tables = ("projected_messages", "projected_receipts")
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text(f"ANALYZE {', '.join(tables)}"))
    else:
        for table in tables:
            session.execute(text(f"ANALYZE {table}"))


def row_counts(session: Session) -> dict[str, int]:
    models = (ProjectedMessage, ProjectedReceipt, ProjectedTombstone, SourceCursor)
    return {
        model.__tablename__: int(session.scalar(select(func.count()).select_from(model)) or 0)
        for model in models
    }


def _ts(value: datetime | None) -> str | None:
    return None if value is None else canonical_timestamp(value, "stored")


def _uid(value: uuid.UUID | None) -> str | None:
    return None if value is None else canonical_uuid(value)


def message_row(m: ProjectedMessage | SqlRow[Any]) -> Row:
    """A projected message in canonical bundle form (`source_revision` as `revision`)."""
    return {
        "id": canonical_uuid(m.id),
        "from_agent": m.from_agent,
        "to_agent": m.to_agent,
        "subject": m.subject,
        "body": m.body,
        "thread_id": _uid(m.thread_id),
        "read_at": _ts(m.read_at),
        "archived_at": _ts(m.archived_at),
        "kind": m.kind,
        "expires_at": _ts(m.expires_at),
        "supersedes_id": _uid(m.supersedes_id),
        "created_at": _ts(m.created_at),
        "revision": m.source_revision,
    }


def receipt_row(r: ProjectedReceipt | SqlRow[Any]) -> Row:
    return {
        "message_id": canonical_uuid(r.message_id),
        "agent": r.agent,
        "delivered_at": _ts(r.delivered_at),
        "read_at": _ts(r.read_at),
        "acknowledged_at": _ts(r.acknowledged_at),
        "revision": r.source_revision,
    }


def _agent_order(session: Session) -> ColumnElement[str] | InstrumentedAttribute[str]:
    """Agents by code point, as bundles order them (PostgreSQL's collation would not)."""
    if session.get_bind().dialect.name == "postgresql":
        return ProjectedReceipt.agent.collate("C")
    return ProjectedReceipt.agent


def stored_messages(session: Session) -> Iterator[Row]:
    """Every projected message in canonical bundle form (`source_revision` as `revision`),
    in id order (a UUID sorts as its canonical text on both databases)."""
    stmt = select(ProjectedMessage).order_by(ProjectedMessage.id)
    for m in session.scalars(stmt).yield_per(INSERT_BATCH):
        yield message_row(m)


def stored_receipts(session: Session) -> Iterator[Row]:
    """Every projected receipt, in bundle key order (message id, then agent)."""
    stmt = select(ProjectedReceipt).order_by(ProjectedReceipt.message_id, _agent_order(session))
    for r in session.scalars(stmt).yield_per(INSERT_BATCH):
        yield receipt_row(r)


def stored_tombstones(session: Session) -> Iterator[Row]:
    stmt = select(ProjectedTombstone).order_by(ProjectedTombstone.message_id)
    for t in session.scalars(stmt).yield_per(INSERT_BATCH):
        yield {
            "message_id": canonical_uuid(t.message_id),
            "revision": t.revision,
            "deleted_at": _ts(t.deleted_at),
        }


def _absent_targets(field: str) -> Select[tuple[Any]]:
    """The distinct values of `field` (thread_id, supersedes_id) that name no held message:
    read from `field`'s index and looked up by id, one probe per target, instead of a
    probe per message (the join over every message was most of a large import's rules)."""
    column = getattr(ProjectedMessage, field)
    named = select(column.label("target")).where(column.is_not(None)).distinct().subquery()
    held = aliased(ProjectedMessage)
    return select(named.c.target).where(~exists().where(held.id == named.c.target))


def dangling_links(session: Session, field: str) -> list[str]:
    """Ids of messages whose `field` (thread_id, supersedes_id) names no held message."""
    column = getattr(ProjectedMessage, field)
    stmt = (
        select(ProjectedMessage.id)
        .where(column.in_(_absent_targets(field)))
        .order_by(ProjectedMessage.id)
    )
    return [canonical_uuid(i) for i in session.scalars(stmt)]


def unrooted_messages(session: Session) -> list[str]:
    """Ids of messages no thread_id chain from a root (no thread_id) reaches: with every
    thread_id naming a held message, those on or leading into a loop.

    A loop, or a chain leading nowhere, needs a thread_id naming a message that is absent
    or has a thread_id itself; when none does (every reply names a root, as State Hub
    writes threads) no message is unrooted, and the walk from the roots (a recursive
    CTE over every message: most of a large import's rules) is not run."""
    targets = (
        select(ProjectedMessage.thread_id.label("target"))
        .where(ProjectedMessage.thread_id.is_not(None))
        .distinct()
        .subquery()
    )
    held = aliased(ProjectedMessage)
    not_flat = (
        select(targets.c.target)
        .outerjoin(held, held.id == targets.c.target)
        .where(or_(held.id.is_(None), held.thread_id.is_not(None)))
        .limit(1)
    )
    if session.scalar(not_flat) is None:
        return []
    reach = (
        select(ProjectedMessage.id)
        .where(ProjectedMessage.thread_id.is_(None))
        .cte("reach", recursive=True)
    )
    child = aliased(ProjectedMessage)
    reach = reach.union_all(select(child.id).join(reach, child.thread_id == reach.c.id))
    total = session.scalar(select(func.count()).select_from(ProjectedMessage))
    if session.scalar(select(func.count()).select_from(reach)) == total:
        return []
    stmt = (
        select(ProjectedMessage.id)
        .where(ProjectedMessage.id.not_in(select(reach.c.id)))
        .order_by(ProjectedMessage.id)
    )
    return [canonical_uuid(i) for i in session.scalars(stmt)]


def orphan_receipts(session: Session) -> list[str]:
    """Keys (message_id:agent) of receipts whose message is not held."""
    stmt = (
        select(ProjectedReceipt.message_id, ProjectedReceipt.agent)
        .outerjoin(ProjectedMessage, ProjectedMessage.id == ProjectedReceipt.message_id)
        .where(ProjectedMessage.id.is_(None))
        .order_by(ProjectedReceipt.message_id, _agent_order(session))
    )
    return [f"{canonical_uuid(m)}:{a}" for m, a in session.execute(stmt)]


def tombstoned_messages(session: Session) -> list[str]:
    """Ids both held as a message and tombstoned."""
    stmt = (
        select(ProjectedTombstone.message_id)
        .join(ProjectedMessage, ProjectedMessage.id == ProjectedTombstone.message_id)
        .order_by(ProjectedTombstone.message_id)
    )
    return [canonical_uuid(i) for i in session.scalars(stmt)]


def stored_cursors(session: Session) -> list[SourceCursor]:
    return list(session.scalars(select(SourceCursor).order_by(SourceCursor.source_instance)))


def _opt_uuid(value: str | None) -> uuid.UUID | None:
    return None if value is None else uuid.UUID(value)


def _opt_time(value: str | None) -> datetime | None:
    return None if value is None else parse_timestamp(value)


def message_params(row: Row) -> dict[str, Any]:
    return {
        "id": uuid.UUID(row["id"]),
        "from_agent": row["from_agent"],
        "to_agent": row["to_agent"],
        "subject": row["subject"],
        "body": row["body"],
        "thread_id": _opt_uuid(row["thread_id"]),
        "read_at": _opt_time(row["read_at"]),
        "archived_at": _opt_time(row["archived_at"]),
        "kind": row["kind"],
        "expires_at": _opt_time(row["expires_at"]),
        "supersedes_id": _opt_uuid(row["supersedes_id"]),
        "created_at": parse_timestamp(row["created_at"]),
        "source_revision": row["revision"],
    }


def receipt_params(row: Row) -> dict[str, Any]:
    return {
        "message_id": uuid.UUID(row["message_id"]),
        "agent": row["agent"],
        "delivered_at": _opt_time(row["delivered_at"]),
        "read_at": _opt_time(row["read_at"]),
        "acknowledged_at": _opt_time(row["acknowledged_at"]),
        "source_revision": row["revision"],
    }


def tombstone_params(row: Row) -> dict[str, Any]:
    return {
        "message_id": uuid.UUID(row["message_id"]),
        "revision": row["revision"],
        "deleted_at": parse_timestamp(row["deleted_at"]),
    }


Progress = Callable[[int], None]


def _insert_batches(
    session: Session,
    table: Any,
    rows: Sequence[Row],
    params: Callable[[Row], dict[str, Any]],
    progress: Progress | None,
) -> None:
    for start in range(0, len(rows), INSERT_BATCH):
        batch = rows[start : start + INSERT_BATCH]
        session.execute(insert(table), [params(r) for r in batch])
        if progress is not None:
            progress(len(batch))


def insert_messages(
    session: Session, rows: Sequence[Row], progress: Progress | None = None
) -> None:
    """Insert in the given order (the caller puts thread roots first)."""
    _insert_batches(session, ProjectedMessage.__table__, rows, message_params, progress)


def insert_receipts(
    session: Session, rows: Sequence[Row], progress: Progress | None = None
) -> None:
    _insert_batches(session, ProjectedReceipt.__table__, rows, receipt_params, progress)


def insert_tombstones(session: Session, rows: Sequence[Row]) -> None:
    _insert_batches(session, ProjectedTombstone.__table__, rows, tombstone_params, None)


def insert_cursor(session: Session, cursor: SourceCursor) -> None:
    session.add(cursor)
    session.flush()


def latest_cursor(session: Session) -> SourceCursor | None:
    return session.scalars(_latest_cursor_statement()).first()


@cache
def _latest_cursor_statement() -> Select[SourceCursor]:
    return select(SourceCursor).order_by(SourceCursor.last_success_at.desc()).limit(1)


def inbox_page(
    session: Session,
    *,
    reader: str,
    from_agent: str | None,
    unread_only: bool,
    now: datetime,
    limit: int,
) -> list[SqlRow[Any]]:
    """`reader`'s inbox as State Hub lists it: direct and broadcast, live, newest first,
    as rows of `MessageRead`'s columns (no ORM objects: nothing here is changed).

    Direct and broadcast rows are read as two index-ordered scans of
    (to_agent, created_at, id), each stopping at `limit`, and merged here; one
    query with `to_agent IN (…)` makes the planner sort the whole inbox instead.
    The caller's transaction must be one snapshot (see `Database.read_only`).
    """
    params = {"reader": reader, "from_agent": from_agent, "now": now, "limit": limit}
    scans = [
        session.execute(scan, params) for scan in _inbox_scans(from_agent is not None, unread_only)
    ]
    merged = heapq.merge(*scans, key=lambda m: (m.created_at, m.id), reverse=True)
    return list(itertools.islice(merged, limit))


@cache
def _inbox_scans(by_sender: bool, unread_only: bool) -> tuple[Select[Any], Select[Any]]:
    """`inbox_page`'s direct and broadcast scans, built once per shape of query (building
    them per read was a fifth of the read)."""
    reader = bindparam("reader", type_=String)
    now = bindparam("now", type_=UTCDateTime)
    conditions: list[ColumnElement[bool]] = [
        ProjectedMessage.archived_at.is_(None),
        or_(ProjectedMessage.expires_at.is_(None), ProjectedMessage.expires_at > now),
    ]
    if by_sender:
        conditions.append(ProjectedMessage.from_agent == bindparam("from_agent", type_=String))
    direct = [ProjectedMessage.to_agent == reader, *conditions]
    broadcast = [ProjectedMessage.to_agent == BROADCAST, *conditions]
    if unread_only:
        direct.append(ProjectedMessage.read_at.is_(None))
        # A broadcast has no single read_at: it is read when *this reader's* receipt says so.
        broadcast.append(
            not_(
                exists().where(
                    ProjectedReceipt.message_id == ProjectedMessage.id,
                    ProjectedReceipt.agent == reader,
                    ProjectedReceipt.read_at.is_not(None),
                )
            )
        )
    newest_first = (ProjectedMessage.created_at.desc(), ProjectedMessage.id.desc())
    direct_scan, broadcast_scan = (
        select(*INBOX_COLUMNS).where(*where).order_by(*newest_first).limit(bindparam("limit"))
        for where in (direct, broadcast)
    )
    return direct_scan, broadcast_scan
