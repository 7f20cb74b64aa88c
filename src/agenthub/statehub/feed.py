"""The inbox change feed (contract `statehub.inbox-feed.v1`): cursor pages.

A page holds the changes after a cursor up to the source's position
(`position`), read in the same consistent read (`Database.snapshot`) as that
position; the snapshot over the same position is `statehub.snapshot`. A reader
may park (long-poll) while its page would be empty: check before park, and a
wake only makes it re-read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

import orjson
from sqlalchemy import Select, bindparam, exists, func, or_, select, union_all
from sqlalchemy.orm import Session

from agenthub.clock import Clock
from agenthub.statehub import cursor, source
from agenthub.statehub.change_json import encoded_changes, shaped_changes
from agenthub.statehub.errors import FeedError, ResnapshotConflict, ResnapshotGone
from agenthub.statehub.position import Position, PositionReader
from agenthub.statehub.readahead import AheadPage, ReadAhead
from agenthub.statehub.rows import REVISION_TABLES
from agenthub.statehub.store import Database
from agenthub.statehub.wake import FeedWake

DEFAULT_LIMIT = 500
MAX_LIMIT = 5000
# Below common proxy idle timeouts (60 s), so a parked request is never cut.
MAX_WAIT_S = 55.0


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


class FeedService(PositionReader):
    """The feed's cursor pages, each over the position read with it."""

    def __init__(
        self,
        db: Database,
        clock: Clock,
        instance_label: str,
        *,
        read_ahead: ReadAhead | None = None,
    ) -> None:
        super().__init__(db, clock, instance_label)
        self.read_ahead = read_ahead

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
