"""Applying one feed page to the projection (contract §5 and §6).

A page is applied in one destination transaction and the cursor moves in the
same transaction; anything the rules cannot justify raises `FeedRefused` and the
caller's transaction rolls back, so the projection and its cursor stay exactly
as they were. The page itself is parsed by `feedpage`; its changes are merged
key by key, by the §6 table, in `page_merge`.

Out of order (§5): a change at or below the stored cursor must be an exact
replay (a no-op or stale); a page whose `high_water` is below the stored one,
or from another instance or epoch, is refused.

Thread closure is checked at a checkpoint (`next_cursor == high_water` and no
more pages), not per page: rows keep only their latest revision, so a root
archived after its reply was written arrives after the reply. While following
live every page is a checkpoint, and the one before it was too: the check then
looks only near the rows the page wrote or removed (`PageMerge.closure_violations`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from agenthub.clock import Clock
from agenthub.hubcore import feedrepo, repository
from agenthub.hubcore.errors import FeedRefused
from agenthub.hubcore.feedpage import (
    RESNAPSHOT_HINT,
    FeedPage,
    decode_cursor,
    encode_cursor,
    parse_page,
)
from agenthub.hubcore.freshness import LIVE
from agenthub.hubcore.models import SourceCursor
from agenthub.hubcore.page_merge import ChangeCounts, PageMerge
from agenthub.hubcore.store import Database


@dataclass
class ApplyResult(ChangeCounts):
    """What applying one page did: its changes counted by outcome, and the cursor after it."""

    cursor: str = ""
    high_water: str = ""
    checkpoint: bool = False
    # Nothing more to fetch right now (`has_more` false).
    drained: bool = False


def check_source(stored: SourceCursor, page: FeedPage, *, replay: bool) -> None:
    """§5: the page must come from the source, epoch and history the cursor belongs to."""
    if page.source_instance != stored.source_instance:
        raise FeedRefused(
            "source_mismatch",
            f"page is from source {page.source_instance!r}, the cursor belongs to "
            f"{stored.source_instance!r}",
            hint="re-snapshot to follow another State Hub",
        )
    if stored.source_epoch and page.source_epoch and page.source_epoch != stored.source_epoch:
        raise FeedRefused(
            "epoch_changed",
            f"source epoch changed ({stored.source_epoch!r} -> {page.source_epoch!r}): "
            "State Hub was restored or failed over",
            hint=RESNAPSHOT_HINT,
        )
    seen = decode_cursor(stored.high_water, "stored high_water")
    # A replayed old page carries its old high water; it is judged change by change.
    if page.high_water < seen and not replay:
        raise FeedRefused(
            "falling_high_water",
            f"page high_water v1:{page.high_water} is below v1:{seen} already seen from "
            f"{stored.source_instance!r}: the source was restored or rolled back",
            hint="the copy is no longer served as fresh; the follower re-snapshots",
        )


def apply_page(
    session: Session, raw: Any, *, now: datetime, after: str | None = None
) -> ApplyResult:
    """Apply one feed page inside the caller's transaction; raise `FeedRefused` on any rule.

    `after` is the cursor the page was asked for, when known: a page asked for
    beyond the stored cursor would skip the changes in between (pages delivered
    out of order), so it is refused. The caller commits only if this returns,
    and rolls back otherwise.
    """
    page = parse_page(raw)
    # Two followers of one database (several server workers) take turns; the
    # second then finds its page already applied, a replay. A page lost with an
    # unflushed commit is asked for again, so the commit need not wait for the flush.
    repository.lock_projection(session, wait_for_flush=False)
    stored = feedrepo.the_cursor(session)
    if stored is None:
        raise FeedRefused(
            "no_cursor",
            "the projection has no cursor to follow from",
            hint="take a snapshot first (the follower does this by itself when empty)",
        )
    cursor = decode_cursor(stored.cursor, "stored cursor")
    if after is not None and decode_cursor(after, "after") > cursor:
        raise FeedRefused(
            "out_of_order_page",
            f"page was asked for after {after} but the projection stands at {stored.cursor}: "
            "applying it would skip the changes in between",
            hint="apply pages in the order they were asked for; the follower re-asks",
            # The rows and cursor stored agree (a commit lost before its flush, or a
            # restored database, leaves both as they were): asking again from the
            # stored cursor is enough, a re-snapshot would refetch everything.
            resnapshot=False,
        )
    # Every change at or below the cursor: only an exact replay (no-ops, stale) passes,
    # and it tells nothing new about the source, so the envelope is not taken.
    replay = bool(page.changes) and page.next_cursor <= cursor
    check_source(stored, page, replay=replay)
    # A cursor standing at its high water was left by a checkpoint whose closure check
    # passed (a snapshot swap checks closure too): the projection is closed right now.
    closed_before = stored.cursor == stored.high_water
    result = ApplyResult()
    run = PageMerge(session, page, cursor, result)
    run.run()
    if replay:
        result.cursor, result.high_water = stored.cursor, stored.high_water
        return result
    result.drained = not page.has_more
    new_cursor = max(cursor, page.next_cursor)
    stored.cursor = encode_cursor(new_cursor)
    stored.high_water = encode_cursor(page.high_water)
    stored.source_epoch = page.source_epoch or stored.source_epoch
    stored.last_source_time = max(stored.last_source_time, page.source_time)
    stored.last_success_at = now
    stored.mode = LIVE
    stored.last_error = None
    stored.last_error_at = None
    session.flush()
    result.cursor = stored.cursor
    result.high_water = stored.high_water
    result.checkpoint = page.checkpoint and new_cursor == page.high_water
    if result.checkpoint:
        broken = run.closure_violations(closed_before)
        if broken:
            raise FeedRefused(
                "closure_broken",
                "caught up with the source, but rows name messages the projection lacks",
                rows=broken,
                hint=RESNAPSHOT_HINT,
            )
    return result


class PageApplier:
    """`apply_page` in a transaction of its own. `before_commit` runs after the page is
    applied and before the commit (a test hook: raising there must change nothing)."""

    def __init__(
        self, db: Database, clock: Clock, *, before_commit: Callable[[], None] | None = None
    ) -> None:
        self.db = db
        self.clock = clock
        self.before_commit = before_commit

    def apply(self, raw: Any, *, after: str | None = None) -> ApplyResult:
        with self.db.write() as session:
            result = apply_page(session, raw, now=self.clock.now(), after=after)
            if self.before_commit is not None:
                self.before_commit()
        return result

    def record_error(self, message: str) -> None:
        with self.db.write() as session:
            feedrepo.record_error(session, message, self.clock.now())
