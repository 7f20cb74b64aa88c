"""The source's position (contract `statehub.inbox-feed.v1`): where State Hub stands
inside one consistent read.

A position is the source's identity (instance, epoch), its clock, the high water
every page and snapshot may serve up to, and the compaction horizon below which
a cursor is gone. The servable bound is the watermark of the revision mode: the
highest visible revision under `lock` (and on SQLite), and everything below
`pg_snapshot_xmin` under `xid`. It is read in one statement. On SQLite the
reader also keeps the restore detector (`source.ServedHighWater`): a file
restored below what was served gets a new epoch. Pages over a position are
`feed`'s, snapshots `snapshot`'s.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

from sqlalchemy import ScalarSelect, Select, bindparam, func, select, text
from sqlalchemy.orm import Session

from agenthub.clock import Clock
from agenthub.statehub import cursor, source
from agenthub.statehub.rows import RECEIPT_TOMBSTONES, REVISION_TABLES, TOMBSTONES, iso
from agenthub.statehub.store import Database

TOMBSTONE_HORIZON = timedelta(days=90)


@dataclass(frozen=True)
class Position:
    """Where the source stands inside one consistent read."""

    instance: str
    epoch: str
    source_time: datetime
    # Every revision at or below it is final and may be served.
    high_water: int
    compacted_before: int
    # What a page read ahead must have been read from to be served here (`readahead`);
    # None under `xid`, where equal highest revisions do not mean nothing committed.
    fingerprint: Hashable | None = None
    # SQLite's epoch token, for the restore detector (`source.ServedHighWater`).
    sqlite_token: str | None = None

    def envelope(self) -> dict[str, Any]:
        return {
            "contract": cursor.CONTRACT,
            "source_instance": self.instance,
            "source_epoch": self.epoch,
            "source_time": iso(self.source_time),
            "high_water": cursor.encode(self.high_water),
            "compacted_before": cursor.encode(self.compacted_before),
        }


def _maxima(bounded: bool) -> list[ScalarSelect[Any]]:
    """Each revision table's highest revision (at or below `:bound`), as subqueries."""
    columns = []
    for table in REVISION_TABLES:
        stmt = select(func.max(table.revision))
        if bounded:
            stmt = stmt.where(table.revision <= bindparam("bound"))
        columns.append(stmt.scalar_subquery())
    return columns


@cache
def _maxima_statement(bounded: bool) -> Select[Any]:
    return select(*_maxima(bounded))


@cache
def _position_statement(postgres: bool) -> Select[Any]:
    """`read_position`'s one statement: the maxima, the highest revision of each
    tombstone table deleted before `:cutoff` (compacted away), the source's
    identity (`source.identity_columns`), then on PostgreSQL `now()` and the
    snapshot's xmin (the `xid` bound)."""
    compacted = [
        select(
            func.coalesce(func.max(t.revision).filter(t.deleted_at < bindparam("cutoff")), 0)
        ).scalar_subquery()
        for t in (TOMBSTONES, RECEIPT_TOMBSTONES)
    ]
    clock = [func.now(), text(_XMIN)]
    return select(
        *_maxima(False),
        *compacted,
        *source.identity_columns(postgres),
        *(clock if postgres else []),
    )


# The oldest transaction still running when the snapshot was taken (`xid` mode).
_XMIN = "pg_snapshot_xmin(pg_current_snapshot())::text::bigint"


def _xid_bound(xmin: Any, state: source.SourceState) -> int:
    """`xid`: the highest revision that is final, below the oldest running transaction."""
    return int(xmin) + state.xid_offset - 1


def _highest(maxima: Iterable[Any]) -> int:
    return max((int(v) for v in maxima if v is not None), default=0)


class PositionReader:
    """Reads the source's position in the caller's consistent read, and keeps
    SQLite's restore detector."""

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

    def record_served(self, pos: Position) -> bool:
        """Record `pos` as served (SQLite's restore detector); False, recording nothing,
        when the file was restored below what was served under the same token (the
        caller then rotates the token and reads again)."""
        if self.served is None or pos.sqlite_token is None:
            return True
        if self.served.restored(pos.sqlite_token, pos.high_water):
            return False
        self.served.record(pos.sqlite_token, pos.high_water)
        return True

    @staticmethod
    def _bound(session: Session, state: source.SourceState) -> int | None:
        """The highest revision that is final, when the mode needs one (`xid`)."""
        if state.mode != "xid" or session.get_bind().dialect.name != "postgresql":
            return None
        xmin: int = session.execute(text(f"SELECT {_XMIN}")).scalar_one()
        return _xid_bound(xmin, state)

    def servable_high_water(self) -> int:
        """The wake poll's probe: the highest revision a reader could be served now."""
        with self.db.read() as session:
            return self._max_revision(session, self._bound(session, source.read_state(session)))

    def read_position(self, session: Session) -> Position:
        postgres = not self.db.sqlite
        # One statement: each table's highest revision, the compaction horizon, the
        # source's mode and epoch and (PostgreSQL) its clock and xmin. A small live
        # page spent most of its time on the round trips of asking for each in turn.
        cutoff = self.clock.now() - TOMBSTONE_HORIZON
        row = session.execute(_position_statement(postgres), {"cutoff": cutoff}).one()
        tables = len(REVISION_TABLES)
        maxima, compacted = row[:tables], row[tables : tables + 2]
        who = source.identity(row[tables + 2 :], postgres)
        source_time = row[-2] if postgres else self.clock.now()
        # `xid`: the bound itself. Rows keep only their latest revision, so the
        # highest revision visible below the bound can fall when such a row is
        # updated by a transaction not yet final; the bound never falls.
        xid = postgres and who.state.mode == "xid"
        high_water = _xid_bound(row[-1], who.state) if xid else _highest(maxima)
        compacted_before = max(int(compacted[0]), int(compacted[1]))
        return Position(
            instance=self.instance_label,
            epoch=who.epoch,
            source_time=source_time,
            high_water=high_water,
            compacted_before=compacted_before,
            fingerprint=None if xid else (who.epoch, tuple(maxima), compacted_before),
            sqlite_token=who.sqlite_token,
        )

    @staticmethod
    def _max_revision(session: Session, bound: int | None) -> int:
        stmt = _maxima_statement(bound is not None)
        return _highest(session.execute(stmt, {"bound": bound}).one())

    def high_water_cursor(self) -> str:
        self.check_restore()
        with self.db.snapshot() as session:
            return cursor.encode(self.read_position(session).high_water)

    def position(self) -> dict[str, Any]:
        self.check_restore()
        with self.db.snapshot() as session:
            return self.read_position(session).envelope()
