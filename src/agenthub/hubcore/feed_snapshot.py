"""(Re-)snapshot from State Hub's paged feed snapshot, in bounded memory.

Pages are read in one worker thread (State Hub serves the next page while this
one is checked), hashed on the way, and checked against the last page's `count`
and `content_hash`. The image then goes in whole, in one transaction, so a crash
leaves either the old copy and cursor or the new ones:

- into an empty projection, or after a 410 (the image replaces the copy as it
  is), the pages are bulk-loaded straight into the projection tables inside one
  transaction opened before the first page and committed only after the count,
  the hash and the closure check pass;
- over a copy the image must be checked against, pages are staged in the
  hub-core database (`staged_snapshot_rows`), then one transaction checks and
  swaps them in.

Inside the tombstone horizon (after a 409, a refused page, or a first import)
the new image must account for every row we hold: a row absent from the
snapshot and not tombstoned there is a consistency error, refused and alerted,
never applied; rows present in both go through the §6 rules. After a 410 the
horizon has passed, deletions beyond it have no tombstone any more, and the
image replaces the copy as it is.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from agenthub.clock import Clock
from agenthub.contracts.inbox_feed import (
    CONTRACT,
    SNAPSHOT_PARTS,
    ContentHasher,
    canonical_bytes,
)
from agenthub.hubcore import bulkload, feedrepo, repository
from agenthub.hubcore.canonical import (
    MalformedRow,
    Row,
    canonical_timestamp,
    canonical_uuid,
    normalize_feed_tombstone,
    normalize_message,
    normalize_receipt,
    normalize_receipt_tombstone,
    parse_timestamp,
    receipt_key,
)
from agenthub.hubcore.errors import FeedRefused
from agenthub.hubcore.feedclient import FeedSource
from agenthub.hubcore.feedpage import decode_cursor
from agenthub.hubcore.freshness import LIVE
from agenthub.hubcore.models import (
    ProjectedMessage,
    ProjectedReceipt,
    ProjectedReceiptTombstone,
    ProjectedTombstone,
    SourceCursor,
    StagedSnapshotRow,
)
from agenthub.hubcore.repository import (
    message_row,
    receipt_row,
)
from agenthub.hubcore.rules import decide, message_transition, receipt_transition
from agenthub.hubcore.staged_swap import (
    STAGED_COLUMNS,
    ProjectionLoader,
    indexes_built_after,
    swap_in,
)
from agenthub.hubcore.store import Database

log = logging.getLogger(__name__)

PARTS = SNAPSHOT_PARTS
STAGE_BATCH = 5000
CHECK_CHUNK = 1000
HINT = "State Hub's image does not account for rows hub-core holds; investigate before forcing"
T = TypeVar("T")
# A snapshot page by its token (None: the first), fetched on the event loop.
PageFetch = Callable[[str | None], "Future[dict[str, Any]]"]
# A page's rows taken: (part, key, canonical row, its canonical JSON when State
# Hub sent it canonical, else None).
Taken = tuple[str, str, Row, bytes | None]
# What is done with a page's rows: (snapshot id, page, hasher) -> messages taken.
Sink = Callable[[str, dict[str, Any], ContentHasher], int]
PROJECTION_MODELS = (
    ProjectedReceipt,
    ProjectedMessage,
    ProjectedTombstone,
    ProjectedReceiptTombstone,
    SourceCursor,
)


@dataclass(frozen=True)
class SnapshotResult:
    source_instance: str
    cursor: str
    messages: int
    receipts: int
    tombstones: int
    content_hash: str


def staged_row(part: str, state: Any) -> tuple[str, Row]:
    """The key and canonical row hub-core keeps for one snapshot row."""
    if part == "messages":
        row = normalize_message(state)
        return row["id"], row
    if part == "receipts":
        row = normalize_receipt(state)
        return receipt_key(row), row
    if part == "tombstones":
        row = normalize_feed_tombstone(state)
        return row["message_id"], row
    if part == "receipt_tombstones":
        row = normalize_receipt_tombstone(state)
        return receipt_key(row), row
    raise MalformedRow("part", f"unknown snapshot part {part!r:.30}")


def _malformed(message: str) -> FeedRefused:
    return FeedRefused(
        "malformed_snapshot", message, hint="State Hub must serve statehub.inbox-feed.v1"
    )


HEAD_FIELDS = ("contract", "source_instance", "source_epoch", "source_time", "cursor", "high_water")


def _text(row: Row, canonical: bytes | None) -> str:
    """The staged JSON of a canonical row (its canonical encoding when known)."""
    return (orjson.dumps(row) if canonical is None else canonical).decode()


class SnapshotImporter:
    def __init__(
        self,
        db: Database,
        clock: Clock,
        *,
        page_size: int = 2000,
        before_swap_commit: Callable[[], None] | None = None,
    ) -> None:
        self.db = db
        self.clock = clock
        self.page_size = page_size
        self.before_swap_commit = before_swap_commit

    # -- staging --------------------------------------------------------------------

    def _clear_staging(self) -> None:
        with self.db.write() as session:
            session.execute(delete(StagedSnapshotRow))

    def _stage(self, snapshot_id: str, rows: list[Taken]) -> None:
        with self.db.write() as session:
            bulkload.load(
                session,
                StagedSnapshotRow.__tablename__,
                STAGED_COLUMNS,
                (
                    (snapshot_id, part, key, row["revision"], _text(row, canonical))
                    for part, key, row, canonical in rows
                ),
            )

    def _take(
        self, page: dict[str, Any], hasher: ContentHasher, *, staging: bool = False
    ) -> tuple[int, list[Taken]]:
        """Check, normalize and hash one page's rows (in order); its messages and rows
        (with their canonical text when `staging` them)."""
        taken: list[Taken] = []
        messages = 0
        for position, item in enumerate(page.get("rows") or []):
            try:
                part, state = item["part"], item["state"]
                key, row = staged_row(part, state)
            except (MalformedRow, KeyError, TypeError, AttributeError) as exc:
                raise _malformed(f"snapshot row #{position}: {exc}") from None
            # One encoding serves the hash and the staged row whenever State Hub sent
            # the row already canonical (it does): encoding each row twice was a
            # fifth of the follower's CPU.
            text = canonical_bytes(state)
            hasher.add_canonical(part, text)
            taken.append((part, key, row, text if staging and row == state else None))
            messages += part == "messages"
        return messages, taken

    def _take_and_stage(self, snapshot_id: str, page: dict[str, Any], hasher: ContentHasher) -> int:
        messages, taken = self._take(page, hasher, staging=True)
        self._stage(snapshot_id, taken)
        return messages

    def _read(self, fetch: PageFetch, sink: Sink) -> tuple[dict[str, Any], str]:
        """Every page through `sink`, checked to be one image; the head (envelope +
        cursor) and the snapshot id. Runs in a worker thread."""
        hasher = ContentHasher()
        messages = 0
        head: dict[str, Any] | None = None
        snapshot_id = ""
        page: dict[str, Any] = {}
        pending: Future[dict[str, Any]] | None = fetch(None)
        while pending is not None:
            page = pending.result()
            if page.get("contract") != CONTRACT:
                raise _malformed(f"snapshot contract is {page.get('contract')!r:.40}")
            this_head = {k: page.get(k) for k in HEAD_FIELDS}
            if head is None:
                head, snapshot_id = this_head, str(page.get("snapshot_id") or "")
                if not snapshot_id:
                    raise _malformed("snapshot page has no snapshot_id")
            elif this_head != head or page.get("snapshot_id") != snapshot_id:
                raise _malformed("snapshot pages disagree on their image (instance, cursor, id)")
            token = page.get("next_page")
            # State Hub serves the next page while this one is checked and taken.
            pending = fetch(token) if token is not None else None
            try:
                messages += sink(snapshot_id, page, hasher)
            except BaseException:
                if pending is not None:
                    pending.cancel()
                raise
        assert head is not None
        digest = hasher.finish()
        if page.get("count") != messages or page.get("content_hash") != digest:
            raise FeedRefused(
                "snapshot_mismatch",
                f"snapshot pages hold {messages} messages hashing to {digest}, but State Hub "
                f"declared {page.get('count')} / {page.get('content_hash')}",
                hint="a page was lost or altered in transit; the follower retries",
            )
        for field in ("cursor", "high_water"):
            decode_cursor(head.get(field), field)
        if not isinstance(head.get("source_instance"), str) or not head["source_instance"]:
            raise _malformed("snapshot has no source_instance")
        return {**head, "content_hash": digest}, snapshot_id

    async def _threaded(self, source: FeedSource, work: Callable[[PageFetch], T]) -> T:
        """Run `work` in one worker thread, its pages fetched on this event loop. On
        cancellation the pages in flight are cancelled (the work fails at its wait
        for one, or at its next request) and the work is waited for, so a transaction
        it holds is rolled back before this returns."""
        loop = asyncio.get_running_loop()
        in_flight: set[Future[dict[str, Any]]] = set()
        lock = threading.Lock()  # guards `cancelled` and `in_flight` together
        cancelled = False

        def fetch(token: str | None) -> Future[dict[str, Any]]:
            with lock:
                if cancelled:
                    raise asyncio.CancelledError("the snapshot import was cancelled")
                coroutine = source.snapshot_page(page_size=self.page_size, token=token)
                future = asyncio.run_coroutine_threadsafe(coroutine, loop)
                in_flight.add(future)
            future.add_done_callback(in_flight.discard)
            return future

        task = asyncio.ensure_future(asyncio.to_thread(work, fetch))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            with lock:
                cancelled = True
                for future in list(in_flight):
                    future.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise

    # -- the swap -------------------------------------------------------------------

    @staticmethod
    def _staged_rows(
        session: Session, snapshot_id: str, part: str, keys: list[str]
    ) -> dict[str, Row]:
        found: dict[str, Row] = {}
        for chunk in feedrepo.chunks(keys):
            stmt = select(StagedSnapshotRow.key, StagedSnapshotRow.state).where(
                StagedSnapshotRow.snapshot_id == snapshot_id,
                StagedSnapshotRow.part == part,
                StagedSnapshotRow.key.in_(chunk),
            )
            for key, state in session.execute(stmt):
                found[key] = orjson.loads(state)
        return found

    def _check_accounts_for(self, session: Session, snapshot_id: str) -> None:
        """Every row we hold must be in the image or tombstoned there, and any change
        from ours must be one §6 allows (a snapshot never rolls a row back)."""
        dropped: list[str] = []
        refused: list[str] = []

        def tombstone_in_image(message_id: str) -> int | None:
            found = self._staged_rows(session, snapshot_id, "tombstones", [message_id])
            return found[message_id]["revision"] if message_id in found else None

        def check(
            old: Row, new: Row, key: str, transition: Callable[[Row, Row], str | None]
        ) -> None:
            decision = decide(new, old, lambda: transition(old, new))
            # A snapshot never rolls a row back: what a feed page ignores as stale, it refuses.
            if decision.outcome == "stale":
                refused.append(f"{key} (snapshot revision {new['revision']} < {old['revision']})")
            elif decision.outcome == "refuse":
                refused.append(f"{key} ({decision.reason})")

        held = session.scalars(select(ProjectedMessage).order_by(ProjectedMessage.id))
        for chunk in held.yield_per(CHECK_CHUNK).partitions():
            rows = {canonical_uuid(m.id): message_row(m) for m in chunk}
            keys = list(rows)
            image = self._staged_rows(session, snapshot_id, "messages", keys)
            tombs = self._staged_rows(session, snapshot_id, "tombstones", keys)
            for key, old in rows.items():
                if key in image:
                    check(
                        old,
                        image[key],
                        key,
                        lambda o, n: message_transition(o, n, tombstone_in_image),
                    )
                elif key not in tombs:
                    dropped.append(key)
        receipts = session.scalars(
            select(ProjectedReceipt).order_by(ProjectedReceipt.message_id, ProjectedReceipt.agent)
        )
        for receipt_chunk in receipts.yield_per(CHECK_CHUNK).partitions():
            rows = {
                f"{canonical_uuid(r.message_id)}:{r.agent}": receipt_row(r) for r in receipt_chunk
            }
            keys = list(rows)
            image = self._staged_rows(session, snapshot_id, "receipts", keys)
            deleted = self._staged_rows(session, snapshot_id, "receipt_tombstones", keys)
            tombs = self._staged_rows(
                session, snapshot_id, "tombstones", sorted({k.partition(":")[0] for k in keys})
            )
            for key, old in rows.items():
                if key in image:
                    check(old, image[key], f"receipt {key}", receipt_transition)
                elif key not in deleted and key.partition(":")[0] not in tombs:
                    dropped.append(f"receipt {key}")
        if dropped:
            raise FeedRefused(
                "snapshot_would_drop_rows",
                f"the new snapshot lacks {len(dropped)} row(s) hub-core holds that State Hub "
                "never tombstoned; nothing was applied",
                rows=dropped,
                hint=HINT,
                resnapshot=False,
            )
        if refused:
            raise FeedRefused(
                "snapshot_refused",
                f"the new snapshot changes {len(refused)} row(s) in ways §6 does not allow; "
                "nothing was applied",
                rows=refused,
                hint=HINT,
                resnapshot=False,
            )

    def _swap(self, head: dict[str, Any], snapshot_id: str) -> SnapshotResult:
        counts = dict.fromkeys(PARTS, 0)
        with self.db.write() as session:
            repository.lock_projection(session)
            if self._held(session):
                self._check_accounts_for(session, snapshot_id)
            with indexes_built_after(session):
                for model in PROJECTION_MODELS:
                    session.execute(delete(model))
                for part in PARTS:
                    counts[part] = swap_in(session, snapshot_id, part)
            session.execute(delete(StagedSnapshotRow))
            return self._finish(session, head, counts)

    def _finish(
        self, session: Session, head: dict[str, Any], counts: dict[str, int]
    ) -> SnapshotResult:
        """The image is in: check its closure, set the cursor, and hand the
        transaction back to be committed."""
        broken = feedrepo.closure_violations(session)
        if broken:
            raise FeedRefused(
                "closure_broken",
                "the snapshot names messages it does not hold",
                rows=broken,
                hint=HINT,
                resnapshot=False,
            )
        session.add(
            SourceCursor(
                source_instance=head["source_instance"],
                cursor=head["cursor"],
                high_water=head["high_water"],
                last_source_time=parse_timestamp(
                    canonical_timestamp(head["source_time"], "source_time")
                ),
                last_success_at=self.clock.now(),
                mode=LIVE,
                content_hash=head["content_hash"],
                source_epoch=head.get("source_epoch"),
            )
        )
        session.flush()
        if self.before_swap_commit is not None:
            self.before_swap_commit()
        return SnapshotResult(
            source_instance=head["source_instance"],
            cursor=head["cursor"],
            messages=counts["messages"],
            receipts=counts["receipts"],
            tombstones=counts["tombstones"],
            content_hash=head["content_hash"],
        )

    def _direct(self, fetch: PageFetch, *, gone: bool) -> SnapshotResult | None:
        """Into an empty projection (or after a 410): the pages loaded straight into
        the projection in one transaction, held from before the first page until the
        checks pass. None: the projection holds rows the image must be checked
        against (the staged path). Runs in a worker thread."""
        with self.db.write() as session:
            repository.lock_projection(session)
            if not gone and self._held(session):
                return None
            with indexes_built_after(session):
                for model in PROJECTION_MODELS:
                    session.execute(delete(model))
                loader = ProjectionLoader(session)

                def load(_snapshot_id: str, page: dict[str, Any], hasher: ContentHasher) -> int:
                    messages, taken = self._take(page, hasher)
                    for part, _key, row, _canonical in taken:
                        loader.add(part, row)
                    return messages

                head, _ = self._read(fetch, load)
                loader.flush()
            return self._finish(session, head, loader.loaded)

    @staticmethod
    def _held(session: Session) -> int:
        held = session.scalar(select(func.count()).select_from(ProjectedMessage)) or 0
        return held + (session.scalar(select(func.count()).select_from(ProjectedReceipt)) or 0)

    async def run(self, source: FeedSource, *, gone: bool = False) -> SnapshotResult:
        """Fetch, verify and put in one new image. Raises `FeedRefused`."""
        result = await self._threaded(source, lambda fetch: self._direct(fetch, gone=gone))
        if result is None:
            await asyncio.to_thread(self._clear_staging)
            try:
                head, snapshot_id = await self._threaded(
                    source, lambda fetch: self._read(fetch, self._take_and_stage)
                )
                result = await asyncio.to_thread(self._swap, head, snapshot_id)
            except BaseException:
                await asyncio.to_thread(self._clear_staging)
                raise
        log.info(
            "snapshot %s from %s at %s: %d messages, %d receipts, %d tombstones",
            "replaced the copy" if gone else "applied",
            result.source_instance,
            result.cursor,
            result.messages,
            result.receipts,
            result.tombstones,
        )
        return result
