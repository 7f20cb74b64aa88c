"""(Re-)snapshot from State Hub's paged feed snapshot, in bounded memory.

Pages are staged in the hub-core database (`staged_snapshot_rows`) as they
arrive, hashed on the way, and checked against the last page's `count` and
`content_hash`. Then one transaction swaps the image in whole: the projection's
rows and cursor are replaced by the staged ones, so a crash leaves either the
old copy and cursor or the new ones.

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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
from agenthub.hubcore.staged_swap import STAGED_COLUMNS, indexes_built_after, swap_in
from agenthub.hubcore.store import Database

log = logging.getLogger(__name__)

PARTS = SNAPSHOT_PARTS
STAGE_BATCH = 5000
CHECK_CHUNK = 1000
HINT = "State Hub's image does not account for rows hub-core holds; investigate before forcing"


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


def _text(row: Row | bytes) -> str:
    """The staged JSON of a canonical row (or of its canonical encoding)."""
    return (row if isinstance(row, bytes) else orjson.dumps(row)).decode()


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

    def _stage(self, snapshot_id: str, rows: list[tuple[str, str, int, str]]) -> None:
        with self.db.write() as session:
            bulkload.load(
                session,
                StagedSnapshotRow.__tablename__,
                STAGED_COLUMNS,
                ((snapshot_id, *row) for row in rows),
            )

    def _take(
        self, page: dict[str, Any], hasher: ContentHasher
    ) -> tuple[int, list[tuple[str, str, int, str]]]:
        """Check, normalize and hash one page's rows (in order); its messages and rows."""
        staged: list[tuple[str, str, int, str]] = []
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
            staged.append((part, key, row["revision"], _text(text if row == state else row)))
            messages += part == "messages"
        return messages, staged

    def _take_and_stage(self, snapshot_id: str, page: dict[str, Any], hasher: ContentHasher) -> int:
        messages, staged = self._take(page, hasher)
        self._stage(snapshot_id, staged)
        return messages

    async def fetch(self, source: FeedSource) -> tuple[dict[str, Any], str]:
        """Stage every page; return the head (envelope + cursor) and the snapshot id."""
        await asyncio.to_thread(self._clear_staging)
        hasher = ContentHasher()
        messages = 0
        head: dict[str, Any] | None = None
        snapshot_id = ""
        page = await source.snapshot_page(page_size=self.page_size, token=None)
        while True:
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
            # State Hub serves the next page while this one is checked and staged.
            following = (
                asyncio.ensure_future(source.snapshot_page(page_size=self.page_size, token=token))
                if token is not None
                else None
            )
            try:
                messages += await asyncio.to_thread(self._take_and_stage, snapshot_id, page, hasher)
            except BaseException:
                if following is not None:
                    following.cancel()
                    await asyncio.gather(following, return_exceptions=True)
                raise
            if following is None:
                final = page
                break
            page = await following
        digest = hasher.finish()
        if final.get("count") != messages or final.get("content_hash") != digest:
            raise FeedRefused(
                "snapshot_mismatch",
                f"snapshot pages hold {messages} messages hashing to {digest}, but State Hub "
                f"declared {final.get('count')} / {final.get('content_hash')}",
                hint="a page was lost or altered in transit; the follower retries",
            )
        return {**head, "content_hash": digest}, snapshot_id

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

    def _swap(self, head: dict[str, Any], snapshot_id: str, *, gone: bool) -> SnapshotResult:
        counts = dict.fromkeys(PARTS, 0)
        with self.db.write() as session:
            repository.lock_projection(session)
            held = session.scalar(select(func.count()).select_from(ProjectedMessage)) or 0
            held += session.scalar(select(func.count()).select_from(ProjectedReceipt)) or 0
            if held and not gone:
                self._check_accounts_for(session, snapshot_id)
            with indexes_built_after(session):
                for model in (
                    ProjectedReceipt,
                    ProjectedMessage,
                    ProjectedTombstone,
                    ProjectedReceiptTombstone,
                    SourceCursor,
                ):
                    session.execute(delete(model))
                for part in PARTS:
                    counts[part] = swap_in(session, snapshot_id, part)
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
            session.execute(delete(StagedSnapshotRow))
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

    async def run(self, source: FeedSource, *, gone: bool = False) -> SnapshotResult:
        """Fetch, stage, verify and swap in one new image. Raises `FeedRefused`."""
        head, snapshot_id = await self.fetch(source)
        for field in ("cursor", "high_water"):
            decode_cursor(head.get(field), field)
        if not isinstance(head.get("source_instance"), str) or not head["source_instance"]:
            raise _malformed("snapshot has no source_instance")
        try:
            result = await asyncio.to_thread(self._swap, head, snapshot_id, gone=gone)
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
