"""The feed follower: keeps the projection in step with State Hub (contract §5).

One step reads the persisted cursor, long-polls the next page (`wait=`), and
applies it in one transaction (`apply.PageApplier`). An empty projection is
first filled from a paged snapshot; State Hub's 409/410 `resnapshot_required`
and any page the rules refuse lead to a re-snapshot (`resnapshot`), which is
itself refused and alerted, never applied, when it would drop rows State Hub
never tombstoned. Failures are recorded on the cursor row (`last_error`) and
retried with backoff; the read mode turns `stale` meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from agenthub.clock import Clock
from agenthub.hubcore import feedrepo
from agenthub.hubcore.apply import ApplyResult, PageApplier
from agenthub.hubcore.errors import FeedRefused, HubCoreError, ResnapshotRequired
from agenthub.hubcore.feed_snapshot import SnapshotImporter, SnapshotResult
from agenthub.hubcore.feedclient import FeedSource
from agenthub.hubcore.models import SourceCursor
from agenthub.hubcore.store import Database

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FollowOptions:
    limit: int = 1000
    wait_s: float = 20.0
    snapshot_page_size: int = 2000
    retry_s: float = 0.5
    max_retry_s: float = 30.0
    # The copy reads `live` while the source was heard from within this; an idle source
    # is heard from by the empty page ending each long-poll, so a poll ends within half.
    max_lag_s: float | None = None

    @property
    def poll_wait_s(self) -> float:
        """The long-poll wait per request: `wait_s`, shortened to half the max lag."""
        if self.max_lag_s is None:
            return self.wait_s
        return min(self.wait_s, self.max_lag_s / 2)


Step = ApplyResult | SnapshotResult


@dataclass(frozen=True)
class _Position:
    """Where the last committed apply left the cursor (so the next ask needs no read)."""

    cursor: str
    instance: str
    epoch: str | None


class Follower:
    def __init__(
        self,
        db: Database,
        source: FeedSource,
        clock: Clock,
        options: FollowOptions | None = None,
        *,
        before_commit: Callable[[], None] | None = None,
        before_swap_commit: Callable[[], None] | None = None,
    ) -> None:
        self.db = db
        self.source = source
        self.clock = clock
        self.options = options or FollowOptions()
        self.applier = PageApplier(db, clock, before_commit=before_commit)
        self.importer = SnapshotImporter(
            db,
            clock,
            page_size=self.options.snapshot_page_size,
            before_swap_commit=before_swap_commit,
        )
        self.last_error: str | None = None
        self.resnapshots = 0
        self._known: _Position | None = None

    def _cursor(self) -> SourceCursor | None:
        with self.db.read_only() as session:
            return feedrepo.the_cursor(session)

    def _record(self, exc: HubCoreError) -> None:
        self.last_error = f"{exc.code}: {exc.message}"
        try:
            self.applier.record_error(self.last_error)
        except Exception:  # the database itself may be what failed
            log.exception("could not record the follower error")

    async def _resnapshot(self, *, gone: bool) -> SnapshotResult:
        self.resnapshots += 1
        self._known = None
        try:
            result = await self.importer.run(self.source, gone=gone)
        except FeedRefused as exc:
            log.error("re-snapshot refused, nothing applied: %s", exc.message)
            await asyncio.to_thread(self._record, exc)
            raise
        self.last_error = None
        return result

    async def step(self, *, wait: float | None = None) -> Step:
        """Fetch and apply one page (or take a snapshot when there is nothing to follow)."""
        try:
            return await self._step(wait)
        except BaseException:
            self._known = None
            raise

    async def _step(self, wait: float | None) -> Step:
        position = self._known
        if position is None:
            cursor = await asyncio.to_thread(self._cursor)
            if cursor is None:
                return await self._resnapshot(gone=False)
            position = _Position(cursor.cursor, cursor.source_instance, cursor.source_epoch)
        try:
            page = await self.source.page(
                position.cursor,
                limit=self.options.limit,
                wait=self.options.poll_wait_s if wait is None else wait,
                source_instance=position.instance,
                source_epoch=position.epoch,
            )
        except ResnapshotRequired as exc:
            log.warning("State Hub asks for a re-snapshot: %s", exc.message)
            await asyncio.to_thread(self._record, exc)
            return await self._resnapshot(gone=exc.gone)
        try:
            result = await asyncio.to_thread(self.applier.apply, page, after=position.cursor)
        except FeedRefused as exc:
            log.error("feed page refused, nothing applied: %s", exc.message)
            await asyncio.to_thread(self._record, exc)
            if not exc.resnapshot:
                raise
            return await self._resnapshot(gone=False)
        self.last_error = None
        # The next request starts from what this transaction committed; re-reading
        # the cursor row per page would cost a transaction on every change.
        self._known = _Position(
            result.cursor, position.instance, page.get("source_epoch") or position.epoch
        )
        return result

    async def catch_up(self, *, max_steps: int = 100_000) -> ApplyResult:
        """Step without parking until caught up: a page ending at a checkpoint (cursor ==
        high_water, closure checked), or an empty last page. Under State Hub's `xid`
        revision mode high_water is a transaction bound that other databases' writers
        move too, so the cursor may never equal it; the empty page is the end there."""
        for _ in range(max_steps):
            result = await self.step(wait=0)
            if isinstance(result, ApplyResult) and (
                result.checkpoint or (result.drained and result.changes == 0)
            ):
                return result
        raise RuntimeError(f"not caught up after {max_steps} steps")

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Follow until `stop` is set (or the task is cancelled), retrying with backoff."""
        delay = self.options.retry_s
        while stop is None or not stop.is_set():
            try:
                await self.step()
            except HubCoreError as exc:
                if exc.code != "source_unavailable" or self.last_error is None:
                    log.warning("follower: %s (retrying in %.1fs)", exc.message, delay)
                await asyncio.to_thread(self._record, exc)
                await self._sleep(delay, stop)
                delay = min(delay * 2, self.options.max_retry_s)
            except Exception as exc:  # the database itself failing must not end following
                log.exception("follower step failed (retrying in %.1fs)", delay)
                self.last_error = f"{type(exc).__name__}: {exc}"
                await self._sleep(delay, stop)
                delay = min(delay * 2, self.options.max_retry_s)
            else:
                delay = self.options.retry_s

    @staticmethod
    async def _sleep(seconds: float, stop: asyncio.Event | None) -> None:
        if stop is None:
            await asyncio.sleep(seconds)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=seconds)
