"""The inbox change feed (contract `statehub.inbox-feed.v1`): snapshot and cursor pages.

Both run in one consistent read (`Database.snapshot`). The servable bound is
the watermark of the revision mode: the highest visible revision under `lock`
(and on SQLite), and everything below `pg_snapshot_xmin` under `xid`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Row, String, Uuid, cast, func, select, text, type_coerce
from sqlalchemy.orm import Session

from agenthub.clock import Clock
from agenthub.sqltypes import UTCDateTime
from agenthub.statehub import cursor, source
from agenthub.statehub.errors import FeedError, ResnapshotConflict, ResnapshotGone
from agenthub.statehub.models import (
    AgentMessage,
    MessageReceipt,
    MessageTombstone,
    ReceiptTombstone,
)
from agenthub.statehub.store import Database
from agenthub.statehub.wake import FeedWake

DEFAULT_LIMIT = 500
MAX_LIMIT = 5000
# Below common proxy idle timeouts (60 s), so a parked request is never cut.
MAX_WAIT_S = 55.0
TOMBSTONE_HORIZON = timedelta(days=90)

_M = AgentMessage.__table__.c
_R = MessageReceipt.__table__.c
_T = MessageTombstone.__table__.c
_RT = ReceiptTombstone.__table__.c
MESSAGE_COLUMNS = (
    _M.id, _M.from_agent, _M.to_agent, _M.subject, _M.body, _M.thread_id, _M.read_at,
    _M.archived_at, _M.kind, _M.expires_at, _M.supersedes_id, _M.created_at, _M.revision,
)  # fmt: skip
RECEIPT_COLUMNS = (
    _R.message_id,
    _R.agent,
    _R.delivered_at,
    _R.read_at,
    _R.acknowledged_at,
    _R.revision,
)
TOMBSTONE_COLUMNS = (_T.message_id, _T.revision, _T.deleted_at, _T.reason)
RECEIPT_TOMBSTONE_COLUMNS = (_RT.message_id, _RT.agent, _RT.revision, _RT.deleted_at)
REVISION_TABLES = (_M, _R, _T, _RT)
PG_ISO_FORMAT = 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'


def wire_columns(session: Session, columns: Sequence[Any]) -> tuple[Any, ...]:
    """`columns` as the feed selects them: ids and timestamps arrive as text that
    `uuid_text` and `iso` only slice (PostgreSQL formats them in SQL; SQLite
    hands back its stored text). Parsing every value into `UUID`/`datetime`
    objects only to print them again was most of a page's cost."""
    postgres = session.get_bind().dialect.name == "postgresql"
    out: list[Any] = []
    for column in columns:
        expr: Any
        if isinstance(column.type, Uuid):
            expr = cast(column, String) if postgres else type_coerce(column, String)
        elif isinstance(column.type, UTCDateTime):
            expr = (
                func.to_char(func.timezone("UTC", column), PG_ISO_FORMAT)
                if postgres
                else type_coerce(column, String)
            )
        else:
            out.append(column)
            continue
        out.append(expr.label(column.name))
    return tuple(out)


def iso(value: datetime | str | None) -> str | None:
    """Canonical timestamp text: UTC, microseconds, `Z`."""
    if value is None:
        return None
    if isinstance(value, str):
        if len(value) == 27 and value[10] == "T" and value[26] == "Z":
            return value  # already canonical (formatted by PostgreSQL)
        # SQLite's stored text, "YYYY-MM-DD HH:MM:SS.ffffff" (naive UTC) as written
        # by State Hub and its triggers; anything else takes the slow path.
        if len(value) == 26 and value[10] == " ":
            return f"{value[:10]}T{value[11:]}Z"
        parsed = datetime.fromisoformat(value)
        value = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    if value.utcoffset():
        value = value.astimezone(UTC)
    return value.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def _uuid(value: uuid.UUID | str | None) -> str | None:
    return None if value is None else uuid_text(value)


def uuid_text(value: uuid.UUID | str) -> str:
    """Lowercase hyphenated UUID from a `UUID` or SQLite's stored text."""
    if isinstance(value, str):
        if len(value) == 32:  # SQLite stores the 32 hex digits
            return f"{value[:8]}-{value[8:12]}-{value[12:16]}-{value[16:20]}-{value[20:]}"
        return str(uuid.UUID(value))
    return str(value)


def message_state(row: Row[Any]) -> dict[str, Any]:
    return {
        "id": uuid_text(row.id),
        "from_agent": row.from_agent,
        "to_agent": row.to_agent,
        "subject": row.subject,
        "body": row.body,
        "thread_id": _uuid(row.thread_id),
        "read_at": iso(row.read_at),
        "archived_at": iso(row.archived_at),
        "kind": row.kind,
        "expires_at": iso(row.expires_at),
        "supersedes_id": _uuid(row.supersedes_id),
        "created_at": iso(row.created_at),
        "revision": row.revision,
    }


def receipt_state(row: Row[Any]) -> dict[str, Any]:
    return {
        "message_id": uuid_text(row.message_id),
        "agent": row.agent,
        "delivered_at": iso(row.delivered_at),
        "read_at": iso(row.read_at),
        "acknowledged_at": iso(row.acknowledged_at),
        "revision": row.revision,
    }


def tombstone_state(row: Row[Any]) -> dict[str, Any]:
    return {
        "message_id": uuid_text(row.message_id),
        "revision": row.revision,
        "deleted_at": iso(row.deleted_at),
        "reason": row.reason,
    }


def receipt_tombstone_state(row: Row[Any]) -> dict[str, Any]:
    return {
        "message_id": uuid_text(row.message_id),
        "agent": row.agent,
        "revision": row.revision,
        "deleted_at": iso(row.deleted_at),
    }


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(
    messages: Sequence[dict[str, Any]],
    receipts: Sequence[dict[str, Any]],
    tombstones: Sequence[dict[str, Any]],
) -> str:
    """sha256 of canonical JSON of `{messages, receipts, tombstones}`, rows sorted by key (§8)."""
    hasher = _SnapshotHasher()
    for part, rows, key in (
        ("messages", messages, lambda r: r["id"]),
        ("receipts", receipts, lambda r: (r["message_id"], r["agent"])),
        ("tombstones", tombstones, lambda r: r["message_id"]),
    ):
        hasher.start(part)
        for row in sorted(rows, key=key):
            hasher.add(row)
    return hasher.finish()


class _SnapshotHasher:
    """Hashes `{"messages":[…],"receipts":[…],"tombstones":[…]}` as the rows stream past."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256(b"{")
        self._parts = 0
        self._rows = 0

    def start(self, part: str) -> None:
        prefix = "]," if self._parts else ""
        self._sha.update(f'{prefix}"{part}":['.encode())
        self._parts += 1
        self._rows = 0

    def add(self, row: dict[str, Any]) -> None:
        if self._rows:
            self._sha.update(b",")
        self._sha.update(canonical_json(row).encode())
        self._rows += 1

    def finish(self) -> str:
        self._sha.update(b"]}")
        return self._sha.hexdigest()


@dataclass(frozen=True)
class Position:
    """Where the source stands inside one consistent read."""

    instance: str
    epoch: str
    source_time: datetime
    # Every revision at or below it is final and may be served.
    high_water: int
    compacted_before: int

    def envelope(self) -> dict[str, Any]:
        return {
            "contract": cursor.CONTRACT,
            "source_instance": self.instance,
            "source_epoch": self.epoch,
            "source_time": iso(self.source_time),
            "high_water": cursor.encode(self.high_water),
            "compacted_before": cursor.encode(self.compacted_before),
        }


class FeedService:
    def __init__(self, db: Database, clock: Clock, instance_label: str) -> None:
        self.db = db
        self.clock = clock
        self.instance_label = instance_label
        database = db.engine.url.database
        self.served: source.ServedHighWater | None = None
        if db.sqlite and database and database != ":memory:":
            self.served = source.ServedHighWater(Path(database + ".served"))

    def check_restore(self) -> None:
        """SQLite: rotate the epoch if the file was restored below what we served."""
        if self.served is None:
            return
        with self.db.read() as session:
            token = source.sqlite_token(session)
            high_water = self._max_revision(session, None)
        if self.served.restored(token, high_water):
            source.rotate_sqlite_token(self.db)

    def _served(self, session: Session, pos: Position) -> None:
        if self.served is not None:
            self.served.record(source.sqlite_token(session), pos.high_water)

    # -- position ---------------------------------------------------------------

    @staticmethod
    def _bound(session: Session, state: source.SourceState) -> int | None:
        """The highest revision that is final, when the mode needs one (`xid`)."""
        if state.mode != "xid" or session.get_bind().dialect.name != "postgresql":
            return None
        xmin: int = session.execute(
            text("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")
        ).scalar_one()
        return int(xmin) + state.xid_offset - 1

    def servable_high_water(self) -> int:
        """The wake poll's probe: the highest revision a reader could be served now."""
        with self.db.read() as session:
            return self._max_revision(session, self._bound(session, source.read_state(session)))

    def _position(self, session: Session) -> Position:
        state = source.read_state(session)
        if self.db.sqlite:
            source_time = self.clock.now()
        else:
            source_time = session.execute(text("SELECT now()")).scalar_one()
        bound = self._bound(session, state)
        # `xid`: the bound itself. Rows keep only their latest revision, so the
        # highest revision visible below the bound can fall when such a row is
        # updated by a transaction not yet final; the bound never falls.
        high_water = self._max_revision(session, None) if bound is None else bound
        cutoff = self.clock.now() - TOMBSTONE_HORIZON
        compacted: int = session.execute(
            select(func.coalesce(func.max(_T.revision).filter(_T.deleted_at < cutoff), 0))
        ).scalar_one()
        compacted_receipts: int = session.execute(
            select(func.coalesce(func.max(_RT.revision).filter(_RT.deleted_at < cutoff), 0))
        ).scalar_one()
        return Position(
            instance=self.instance_label,
            epoch=source.epoch(session, state),
            source_time=source_time,
            high_water=high_water,
            compacted_before=max(int(compacted), int(compacted_receipts)),
        )

    @staticmethod
    def _max_revision(session: Session, bound: int | None) -> int:
        best = 0
        for table in REVISION_TABLES:
            stmt = select(func.max(table.revision))
            if bound is not None:
                stmt = stmt.where(table.revision <= bound)
            value: int | None = session.execute(stmt).scalar_one()
            if value is not None and value > best:
                best = int(value)
        return best

    def high_water_cursor(self) -> str:
        self.check_restore()
        with self.db.snapshot() as session:
            return cursor.encode(self._position(session).high_water)

    def position(self) -> dict[str, Any]:
        self.check_restore()
        with self.db.snapshot() as session:
            return self._position(session).envelope()

    # -- cursor pages -------------------------------------------------------------

    def page(
        self,
        after: str,
        limit: int = DEFAULT_LIMIT,
        *,
        source_instance: str | None = None,
        source_epoch: str | None = None,
    ) -> dict[str, Any]:
        self.check_restore()
        with self.db.snapshot() as session:
            pos = self._position(session)
            self._served(session, pos)
            try:
                after_revision = cursor.decode(after)
                self._check(pos, after, after_revision, source_instance, source_epoch)
            except FeedError as exc:
                exc.position = pos.envelope()
                raise
            changes, last = self._changes(session, after_revision, pos.high_water, limit)
            has_more = last < pos.high_water and self._any_after(session, last, pos.high_water)
            return {
                **pos.envelope(),
                "next_cursor": cursor.encode(last) if changes else after,
                "has_more": has_more,
                "changes": changes,
            }

    def _check(
        self,
        pos: Position,
        after: str,
        after_revision: int,
        source_instance: str | None,
        source_epoch: str | None,
    ) -> None:
        hint = "take a new snapshot from GET /messages/feed/snapshot and follow from its cursor"
        if source_instance is not None and source_instance != pos.instance:
            raise ResnapshotConflict(
                f"cursor belongs to source {source_instance!r}, this is {pos.instance!r}", hint=hint
            )
        if source_epoch is not None and source_epoch != pos.epoch:
            raise ResnapshotConflict(
                f"source epoch changed ({source_epoch!r} → {pos.epoch!r}): the database was "
                "restored, failed over or switched revision mode",
                hint=hint,
            )
        if after_revision > pos.high_water:
            raise ResnapshotConflict(
                f"cursor {after} is ahead of this source's high water "
                f"{cursor.encode(pos.high_water)} (another instance or a restored source)",
                hint=hint,
            )
        if after_revision < pos.compacted_before:
            raise ResnapshotGone(
                f"cursor {after} is older than the tombstone horizon "
                f"({cursor.encode(pos.compacted_before)}); deletions before it are no longer served",
                hint=hint,
            )

    def _changes(
        self, session: Session, after: int, bound: int, limit: int
    ) -> tuple[list[dict[str, Any]], int]:
        """Changes in (after, cut], where `cut` is the revision of the `limit`-th
        change: a page ends on a whole revision, so it may run past `limit`."""
        revisions: list[int] = []
        for table in REVISION_TABLES:
            revisions.extend(
                session.scalars(
                    select(table.revision)
                    .where(table.revision > after, table.revision <= bound)
                    .order_by(table.revision)
                    .limit(limit)
                ).all()
            )
        if not revisions:
            return [], after
        revisions.sort()
        cut = revisions[limit - 1] if len(revisions) >= limit else revisions[-1]

        def rows(columns: Sequence[Any], table: Any, *order: Any) -> list[Row[Any]]:
            stmt = (
                select(*wire_columns(session, columns))
                .where(table.revision > after, table.revision <= cut)
                .order_by(table.revision, *order)
            )
            return list(session.execute(stmt).all())

        grouped: dict[int, list[list[dict[str, Any]]]] = {}

        def put(revision: int, slot: int, change: dict[str, Any]) -> None:
            grouped.setdefault(revision, [[], [], [], []])[slot].append(change)

        for row in rows(MESSAGE_COLUMNS, _M, _M.id):
            key = uuid_text(row.id)
            put(
                row.revision, 0, _change(row.revision, "message", key, "upsert", message_state(row))
            )
        for row in rows(RECEIPT_COLUMNS, _R, _R.message_id, _R.agent):
            key = f"{uuid_text(row.message_id)}:{row.agent}"
            put(
                row.revision, 1, _change(row.revision, "receipt", key, "upsert", receipt_state(row))
            )
        for row in rows(RECEIPT_TOMBSTONE_COLUMNS, _RT, _RT.message_id, _RT.agent):
            key = f"{uuid_text(row.message_id)}:{row.agent}"
            state = receipt_tombstone_state(row)
            put(row.revision, 2, _change(row.revision, "receipt", key, "delete", state))
        for row in rows(TOMBSTONE_COLUMNS, _T, _T.message_id):
            key = uuid_text(row.message_id)
            state = tombstone_state(row)
            put(row.revision, 3, _change(row.revision, "tombstone", key, "delete", state))
        changes = [c for rev in sorted(grouped) for slot in grouped[rev] for c in slot]
        return changes, cut

    @staticmethod
    def _any_after(session: Session, revision: int, bound: int) -> bool:
        for table in REVISION_TABLES:
            hit = session.execute(
                select(table.revision)
                .where(table.revision > revision, table.revision <= bound)
                .limit(1)
            ).first()
            if hit is not None:
                return True
        return False

    async def wait_page(
        self,
        wake: FeedWake,
        after: str,
        limit: int = DEFAULT_LIMIT,
        *,
        wait: float = 0.0,
        source_instance: str | None = None,
        source_epoch: str | None = None,
    ) -> dict[str, Any]:
        """A page, parking first (up to `wait` seconds, clamped to 0-55) while it
        would be empty. Check before park; a wake only makes us re-read."""
        wait = min(max(wait, 0.0), MAX_WAIT_S)
        deadline = self.clock.monotonic() + wait
        timed_out = False
        while True:
            generation = wake.generation
            page = await asyncio.to_thread(
                self.page, after, limit, source_instance=source_instance, source_epoch=source_epoch
            )
            remaining = deadline - self.clock.monotonic()
            if page["changes"] or remaining <= 0 or timed_out:
                return page
            timed_out = not await wake.wait_past(generation, remaining)

    # -- snapshot -------------------------------------------------------------------

    def snapshot_stream(self) -> Iterator[bytes]:
        """The whole image as one JSON document, streamed row by row (see `snapshot`)."""
        from agenthub.statehub.snapshot import stream

        return stream(self)

    def snapshot(self) -> dict[str, Any]:
        """The snapshot as one object (tests and in-process callers)."""
        result: dict[str, Any] = json.loads(b"".join(self.snapshot_stream()))
        return result


def _change(revision: int, entity: str, key: str, op: str, state: dict[str, Any]) -> dict[str, Any]:
    return {"revision": revision, "entity": entity, "key": key, "op": op, "state": state}
