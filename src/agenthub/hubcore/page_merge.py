"""Merging one feed page's changes into the projection, key by key (contract §6).

`PageMerge` loads the rows a page touches once (`_Working`), runs every change
through the §6 table in revision order (`rules.decide`; the stored revision `s`
of a key is that of its row, or of its tombstone) and writes what changed back in
batches: insert, ignore a stale replay and log it, no-op on an identical one,
refuse the same revision with other content (`same_revision_conflict`), an
illegal field change (`illegal_transition`) or a reused id
(`tombstoned_id_reused`), else replace. A change written at or below the stored
cursor is refused (`out_of_order_page`): only an exact replay may be there.

It counts each outcome in the `ChangeCounts` it is given, and answers the
checkpoint's closure check looking only near the rows the page wrote or removed
when the projection was closed before it (`PageMerge.closure_violations`). The
page envelope, the cursor and when to check closure are `apply`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from agenthub.hubcore import feedrepo
from agenthub.hubcore.canonical import Row
from agenthub.hubcore.errors import FeedRefused
from agenthub.hubcore.feedpage import RESNAPSHOT_HINT, Change, FeedPage
from agenthub.hubcore.rules import decide, message_transition, no_transition, receipt_transition

log = logging.getLogger(__name__)

# Above this many keys a page's closure check reads every row instead of looking
# near the page's keys: a page that big is catch-up, and its IN lists would be long.
NEAR_CHECK_MAX = 1000


@dataclass
class ChangeCounts:
    """How many of a page's changes had each outcome."""

    inserted: int = 0
    replaced: int = 0
    deleted: int = 0
    unchanged: int = 0
    stale: int = 0

    @property
    def changes(self) -> int:
        return self.inserted + self.replaced + self.deleted + self.unchanged + self.stale


@dataclass
class _Working:
    """The keys a page touches, loaded once, changed in memory, written back in batches."""

    messages: dict[str, Row | None]
    tombstones: dict[str, Row | None]
    receipts: dict[str, Row | None]
    receipt_tombstones: dict[str, Row | None]
    dirty_messages: set[str] = field(default_factory=set)
    dirty_tombstones: set[str] = field(default_factory=set)
    dirty_receipts: set[str] = field(default_factory=set)
    dirty_receipt_tombstones: set[str] = field(default_factory=set)
    dropped_receipts_of: set[str] = field(default_factory=set)
    stored: dict[str, set[str]] = field(default_factory=dict)


def _known(keys: set[str], found: dict[str, Row]) -> dict[str, Row | None]:
    """Every key the page touches: its stored row, or None when there is none."""
    return {key: found.get(key) for key in keys}


def _refuse_conflict(change: Change, stored: Row) -> FeedRefused:
    return FeedRefused(
        "same_revision_conflict",
        f"{change.entity} at revision {change.revision} differs from the stored row "
        "at the same revision",
        rows=[change.key],
        hint=RESNAPSHOT_HINT,
    )


class PageMerge:
    """One page's changes merged into the rows they touch; `run` writes them back."""

    def __init__(self, session: Session, page: FeedPage, cursor: int, result: ChangeCounts) -> None:
        self.session = session
        self.page = page
        self.cursor = cursor
        self.result = result
        self.batch_tombstones = {c.key: c.revision for c in page.changes if c.entity == "tombstone"}
        message_ids = {c.key for c in page.changes if c.entity in ("message", "tombstone")}
        receipt_keys = {c.key for c in page.changes if c.entity == "receipt"}
        receipt_messages = {k.partition(":")[0] for k in receipt_keys}
        self.w = _Working(
            messages=_known(message_ids, feedrepo.load_messages(session, message_ids)),
            tombstones=_known(
                message_ids | receipt_messages,
                feedrepo.load_tombstones(session, message_ids | receipt_messages),
            ),
            receipts=_known(receipt_keys, feedrepo.load_receipts(session, receipt_keys)),
            receipt_tombstones=_known(
                receipt_keys, feedrepo.load_receipt_tombstones(session, receipt_keys)
            ),
        )
        # What exists in the database before this page (a write must delete it first).
        self.w.stored = {
            name: {k for k, v in getattr(self.w, name).items() if v is not None}
            for name in ("messages", "tombstones", "receipts", "receipt_tombstones")
        }

    # -- lookups ------------------------------------------------------------------

    def tombstone_revision(self, message_id: str) -> int | None:
        """The tombstone of `message_id`: in this page, already applied, or stored."""
        revisions = []
        if message_id in self.batch_tombstones:
            revisions.append(self.batch_tombstones[message_id])
        if message_id not in self.w.tombstones:
            loaded = feedrepo.load_tombstones(self.session, [message_id])
            self.w.tombstones[message_id] = loaded.get(message_id)
            if message_id in loaded:
                self.w.stored["tombstones"].add(message_id)
        stored = self.w.tombstones[message_id]
        if stored is not None:
            revisions.append(stored["revision"])
        return min(revisions) if revisions else None

    # -- outcomes -----------------------------------------------------------------

    def _stale(self, change: Change, against: int) -> str:
        log.info(
            "ignored stale %s %s at revision %d (stored revision %d)",
            change.entity,
            change.key,
            change.revision,
            against,
        )
        self.result.stale += 1
        return "stale"

    def _write(self, change: Change, outcome: str) -> str:
        if change.revision <= self.cursor:
            raise FeedRefused(
                "out_of_order_page",
                f"change at revision {change.revision} is at or below the cursor "
                f"v1:{self.cursor} and is not a replay of what was applied",
                rows=[change.key],
                hint=RESNAPSHOT_HINT,
            )
        setattr(self.result, outcome, getattr(self.result, outcome) + 1)
        return outcome

    def _reused(self, change: Change, tombstone: Row) -> FeedRefused:
        return FeedRefused(
            "tombstoned_id_reused",
            f"{change.entity} at revision {change.revision} names a message deleted at "
            f"revision {tombstone['revision']}",
            rows=[change.key],
            hint=RESNAPSHOT_HINT,
        )

    def _against(
        self, change: Change, stored: Row | None, transition: Callable[[], str | None]
    ) -> str:
        """The §6 outcome for one entity key (`rules.decide`), counted: `inserted`,
        `stale` (logged), `unchanged`, `replaced`, or a refusal raised."""
        decision = decide(change.row, stored, transition)
        if stored is None or decision.outcome == "insert":
            return "inserted"
        if decision.outcome == "replace":
            return "replaced"
        if decision.outcome == "stale":
            return self._stale(change, stored["revision"])
        if decision.outcome == "unchanged":
            self.result.unchanged += 1
            return "unchanged"
        if decision.conflict:
            raise _refuse_conflict(change, stored)
        raise FeedRefused(
            "illegal_transition",
            f"{change.entity} at revision {change.revision}: {decision.reason}",
            rows=[change.key],
            hint=RESNAPSHOT_HINT,
        )

    def message(self, change: Change) -> str:
        tombstone = self.w.tombstones[change.key]
        if tombstone is not None:
            if change.revision <= tombstone["revision"]:
                return self._stale(change, tombstone["revision"])
            raise self._reused(change, tombstone)
        stored = self.w.messages[change.key]
        outcome = self._against(
            change,
            stored,
            lambda: message_transition(stored or {}, change.row, self.tombstone_revision),
        )
        if outcome in ("stale", "unchanged"):
            return outcome
        self._write(change, outcome)
        self.w.messages[change.key] = change.row
        self.w.dirty_messages.add(change.key)
        return outcome

    def receipt(self, change: Change) -> str:
        message_id = change.row["message_id"]
        tombstone = self.w.tombstones.get(message_id)
        if tombstone is None:
            self.tombstone_revision(message_id)
            tombstone = self.w.tombstones[message_id]
        if tombstone is not None:
            if change.revision <= tombstone["revision"]:
                return self._stale(change, tombstone["revision"])
            raise self._reused(change, tombstone)
        deleted = self.w.receipt_tombstones[change.key]
        stored = self.w.receipts[change.key]
        if change.op == "delete":
            return self._receipt_delete(change, stored, deleted)
        if deleted is not None and change.revision <= deleted["revision"]:
            return self._stale(change, deleted["revision"])
        outcome = self._against(
            change, stored, lambda: receipt_transition(stored or {}, change.row)
        )
        if outcome in ("stale", "unchanged"):
            return outcome
        self._write(change, outcome)
        self.w.receipts[change.key] = change.row
        self.w.dirty_receipts.add(change.key)
        return outcome

    def _receipt_delete(self, change: Change, stored: Row | None, deleted: Row | None) -> str:
        if stored is not None and change.revision < stored["revision"]:
            return self._stale(change, stored["revision"])
        if stored is not None and change.revision == stored["revision"]:
            raise _refuse_conflict(change, stored)
        if deleted is not None and (stored is None or change.revision < deleted["revision"]):
            # Against the stored deletion; a later one replaces it.
            outcome = self._against(change, deleted, no_transition)
            if outcome != "replaced":
                return outcome
        self._write(change, "deleted")
        self.w.receipts[change.key] = None
        self.w.dirty_receipts.add(change.key)
        self.w.receipt_tombstones[change.key] = change.row
        self.w.dirty_receipt_tombstones.add(change.key)
        return "deleted"

    def tombstone(self, change: Change) -> str:
        stored_tombstone = self.w.tombstones[change.key]
        if stored_tombstone is not None:
            # A message is deleted once: a later tombstone means its id was reused.
            outcome = self._against(change, stored_tombstone, no_transition)
            if outcome == "replaced":
                raise self._reused(change, stored_tombstone)
            return outcome
        stored = self.w.messages[change.key]
        if stored is not None and change.revision < stored["revision"]:
            return self._stale(change, stored["revision"])
        self._write(change, "deleted")
        # The derived row and its receipts go; only (id, revision, deleted_at) stays.
        self.w.messages[change.key] = None
        self.w.dirty_messages.add(change.key)
        self.w.dropped_receipts_of.add(change.key)
        for key in list(self.w.receipts):
            if key.startswith(change.key + ":") and self.w.receipts[key] is not None:
                self.w.receipts[key] = None
                self.w.dirty_receipts.add(key)
        self.w.tombstones[change.key] = change.row
        self.w.dirty_tombstones.add(change.key)
        return "deleted"

    def closure_violations(self, closed_before: bool) -> list[str]:
        """The checkpoint's closure check. From a projection that was closed before
        this page (the last apply ended on a checked checkpoint, or a snapshot was
        swapped in), only the rows the page wrote or removed can break it; otherwise,
        or for a page too big for that to pay, every row is checked."""
        w = self.w
        written = [k for k in w.dirty_messages if w.messages[k] is not None]
        removed = [k for k in w.dirty_messages if w.messages[k] is None]
        receipts_of = {k.partition(":")[0] for k in w.dirty_receipts if w.receipts[k] is not None}
        if not closed_before or len(written) + len(removed) + len(receipts_of) > NEAR_CHECK_MAX:
            return feedrepo.closure_violations(self.session)
        return feedrepo.closure_violations_near(
            self.session, written=written, removed=removed, receipts_of=receipts_of
        )

    def run(self) -> None:
        handlers: dict[str, Callable[[Change], str]] = {
            "message": self.message,
            "receipt": self.receipt,
            "tombstone": self.tombstone,
        }
        for change in self.page.changes:
            handlers[change.entity](change)
        w = self.w
        session = self.session
        stored = w.stored
        feedrepo.write_messages(
            session, {k: w.messages[k] for k in w.dirty_messages}, stored["messages"]
        )
        feedrepo.drop_receipts_of(session, w.dropped_receipts_of)
        # Receipts dropped with their message above are gone already; any left are stored.
        feedrepo.write_receipts(
            session, {k: w.receipts[k] for k in w.dirty_receipts}, stored["receipts"]
        )
        tombstones = {k: w.tombstones[k] for k in w.dirty_tombstones}
        feedrepo.write_tombstones(
            session, {k: v for k, v in tombstones.items() if v is not None}, stored["tombstones"]
        )
        receipt_tombstones = {k: w.receipt_tombstones[k] for k in w.dirty_receipt_tombstones}
        feedrepo.write_receipt_tombstones(
            session,
            {k: v for k, v in receipt_tombstones.items() if v is not None},
            stored["receipt_tombstones"],
        )
