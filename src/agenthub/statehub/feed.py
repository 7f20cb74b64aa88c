"""The inbox change feed (contract `statehub.inbox-feed.v1`): the source's position and cursor pages.

The snapshot over the same position is `statehub.snapshot`. Both run in one consistent read (`Database.snapshot`). The servable bound is
the watermark of the revision mode: the highest visible revision under `lock`
(and on SQLite), and everything below `pg_snapshot_xmin` under `xid`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import orjson
from sqlalchemy import ScalarSelect, Select, bindparam, exists, func, or_, select, text, union_all
from sqlalchemy.orm import Session

from agenthub.clock import Clock
from agenthub.statehub import cursor, source
from agenthub.statehub.change_json import encoded_changes, shaped_changes
from agenthub.statehub.errors import FeedError, ResnapshotConflict, ResnapshotGone
from agenthub.statehub.readahead import AheadPage, ReadAhead
from agenthub.statehub.rows import RECEIPT_TOMBSTONES, REVISION_TABLES, TOMBSTONES, iso
from agenthub.statehub.store import Database
from agenthub.statehub.wake import FeedWake

DEFAULT_LIMIT = 500
MAX_LIMIT = 5000
# Below common proxy idle timeouts (60 s), so a parked request is never cut.
MAX_WAIT_S = 55.0
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


@dataclass(frozen=True)
class Window:
    """What one cursor page covers: changes in (after, cut]."""

    position: Position
    after: int
    cut: int  # `after` itself when there is no change
    any: bool
    has_more: bool

    def head(self, after: str, has_changes: bool) -> dict[str, Any]:
        """The page's fields before `changes`."""
        return {
            **self.position.envelope(),
            "next_cursor": cursor.encode(self.cut) if has_changes else after,
            "has_more": self.has_more,
        }


@dataclass(frozen=True)
class EncodedPage:
    changes: int
    body: bytes


P = TypeVar("P")


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


@cache
def _cut_statement() -> Select[Any]:
    """`_cut`'s one statement. The first `:limit` revisions of each table after
    `:after` hold the first `:limit` of all of them, so the `:limit`-th of their
    union (or, with fewer, the highest) is the page's last revision; then whether
    any table has a revision past it. Sending every candidate revision to Python
    to sort was a fifth of a 5000-change page."""
    arms = [
        select(
            select(t.revision.label("revision"))
            .where(t.revision > bindparam("after"), t.revision <= bindparam("bound"))
            .order_by(t.revision)
            .limit(bindparam("limit"))
            .subquery()
        )
        for t in REVISION_TABLES
    ]
    revisions = union_all(*arms).cte("revisions")
    nth = (
        select(revisions.c.revision)
        .order_by(revisions.c.revision)
        .limit(1)
        .offset(bindparam("offset"))
        .scalar_subquery()
    )
    cut = (
        select(func.coalesce(nth, select(func.max(revisions.c.revision)).scalar_subquery()))
        .scalar_subquery()
        .label("cut")
    )
    page = select(cut).subquery("page")
    past = or_(
        *(
            exists().where(t.revision > page.c.cut, t.revision <= bindparam("bound"))
            for t in REVISION_TABLES
        )
    )
    return select(page.c.cut, past)


# The oldest transaction still running when the snapshot was taken (`xid` mode).
_XMIN = "pg_snapshot_xmin(pg_current_snapshot())::text::bigint"


def _xid_bound(xmin: Any, state: source.SourceState) -> int:
    """`xid`: the highest revision that is final, below the oldest running transaction."""
    return int(xmin) + state.xid_offset - 1


def _highest(maxima: Iterable[Any]) -> int:
    return max((int(v) for v in maxima if v is not None), default=0)


class FeedService:
    def __init__(
        self,
        db: Database,
        clock: Clock,
        instance_label: str,
        *,
        read_ahead: ReadAhead | None = None,
    ) -> None:
        self.db = db
        self.clock = clock
        self.instance_label = instance_label
        self.read_ahead = read_ahead
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

    # -- position ---------------------------------------------------------------

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

    # -- cursor pages -------------------------------------------------------------

    def page(
        self,
        after: str,
        limit: int = DEFAULT_LIMIT,
        *,
        source_instance: str | None = None,
        source_epoch: str | None = None,
    ) -> dict[str, Any]:
        """A cursor page as dicts (in-process followers)."""
        with self._window(after, limit, source_instance, source_epoch) as (session, window):
            changes = shaped_changes(session, window.after, window.cut) if window.any else []
            return {**window.head(after, bool(changes)), "changes": changes}

    def encoded_page(
        self,
        after: str,
        limit: int = DEFAULT_LIMIT,
        *,
        source_instance: str | None = None,
        source_epoch: str | None = None,
    ) -> EncodedPage:
        """The same page as its JSON body (`change_json`). With read-ahead, a page
        that has more starts building the next one for the reader's next request."""
        ahead = self.read_ahead.take((after, limit)) if self.read_ahead is not None else None
        with self._checked(after, source_instance, source_epoch) as (session, pos, after_revision):
            fingerprint = pos.fingerprint
            if ahead is not None and fingerprint is not None and ahead.fingerprint == fingerprint:
                window = Window(pos, after_revision, ahead.cut, True, ahead.has_more)
                count, changes = ahead.count, ahead.changes
            else:
                window = self._window_at(session, pos, after_revision, limit)
                count, changes = (
                    encoded_changes(session, window.after, window.cut) if window.any else (0, b"")
                )
            head = orjson.dumps(window.head(after, count > 0))
        self._read_ahead_after(window, limit)
        body = b"".join((head[:-1], b',"changes":[', changes, b"]}"))
        return EncodedPage(changes=count, body=body)

    def _read_ahead_after(self, window: Window, limit: int) -> None:
        """Start building the page after `window`, when there is one and it may be served."""
        ahead, fingerprint = self.read_ahead, window.position.fingerprint
        if window.has_more and ahead is not None and fingerprint is not None:
            cut = window.cut
            ahead.schedule((cursor.encode(cut), limit), lambda: self._build_ahead(cut, limit))

    def _build_ahead(self, after: int, limit: int) -> AheadPage | None:
        """The changes of the page after `after`, in a read of their own (`readahead`)."""
        with self.db.snapshot() as session:
            pos = self.read_position(session)
            if pos.fingerprint is None or not pos.compacted_before <= after <= pos.high_water:
                return None
            window = self._window_at(session, pos, after, limit)
            if not window.any:
                return None
            self._read_ahead_after(window, limit)
            count, changes = encoded_changes(session, after, window.cut)
            return AheadPage(pos.fingerprint, window.cut, window.has_more, count, changes)

    @contextmanager
    def _window(
        self, after: str, limit: int, source_instance: str | None, source_epoch: str | None
    ) -> Iterator[tuple[Session, Window]]:
        """One consistent read: the position, the cursor checked against it, and the
        revision a page of `limit` changes after the cursor ends on."""
        with self._checked(after, source_instance, source_epoch) as (session, pos, after_revision):
            yield session, self._window_at(session, pos, after_revision, limit)

    @contextmanager
    def _checked(
        self, after: str, source_instance: str | None, source_epoch: str | None
    ) -> Iterator[tuple[Session, Position, int]]:
        """One consistent read: the position, and the cursor's revision checked against it."""
        for _attempt in range(2):
            with self.db.snapshot() as session:
                pos = self.read_position(session)
                if self.record_served(pos):
                    try:
                        after_revision = cursor.decode(after)
                        self._check(pos, after, after_revision, source_instance, source_epoch)
                    except FeedError as exc:
                        exc.position = pos.envelope()
                        raise
                    yield session, pos, after_revision
                    return
            # Restored below what was served: a new token, so a new epoch, and read again.
            source.rotate_sqlite_token(self.db)
        raise RuntimeError("the restore detector refused a freshly rotated token")

    def _window_at(self, session: Session, pos: Position, after: int, limit: int) -> Window:
        """The page of `limit` changes after `after` that `pos` allows."""
        cut, has_more = self._cut(session, after, pos.high_water, limit)
        last = after if cut is None else cut
        return Window(pos, after, last, cut is not None, has_more)

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

    @staticmethod
    def _cut(session: Session, after: int, bound: int, limit: int) -> tuple[int | None, bool]:
        """(the revision of the `limit`-th change after `after`, or of the last one;
        whether any change lies past it up to `bound`). A page ends on a whole
        revision, so it may run past `limit`. None: no change."""
        params = {"after": after, "bound": bound, "limit": limit, "offset": limit - 1}
        row = session.execute(_cut_statement(), params).one()
        return (None if row[0] is None else int(row[0])), bool(row[1])

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

        def fetch() -> dict[str, Any]:
            return self.page(
                after, limit, source_instance=source_instance, source_epoch=source_epoch
            )

        return await self._park(wake, wait, fetch, lambda page: bool(page["changes"]))

    async def wait_encoded_page(
        self,
        wake: FeedWake,
        after: str,
        limit: int = DEFAULT_LIMIT,
        *,
        wait: float = 0.0,
        source_instance: str | None = None,
        source_epoch: str | None = None,
    ) -> EncodedPage:
        """`wait_page` answered as the JSON body (the HTTP route)."""

        def fetch() -> EncodedPage:
            return self.encoded_page(
                after, limit, source_instance=source_instance, source_epoch=source_epoch
            )

        return await self._park(wake, wait, fetch, lambda page: page.changes > 0)

    async def _park(
        self, wake: FeedWake, wait: float, fetch: Callable[[], P], full: Callable[[P], bool]
    ) -> P:
        wait = min(max(wait, 0.0), MAX_WAIT_S)
        deadline = self.clock.monotonic() + wait
        timed_out = False
        while True:
            generation = wake.generation
            page = await asyncio.to_thread(fetch)
            remaining = deadline - self.clock.monotonic()
            if full(page) or remaining <= 0 or timed_out:
                return page
            timed_out = not await wake.wait_past(generation, remaining)
