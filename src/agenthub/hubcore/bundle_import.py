"""The one-time import of a snapshot bundle into an empty hub-core.

`import_snapshot(session, bundle, expected_hash=..., apply=False)` validates a
bundle against every rule of `bundle_rules` and against the receiver, and,
only with `apply=True`, writes it inside the caller's transaction (the caller
commits on success and rolls back on any exception). The receiver must be
empty, or hold exactly this bundle (then the import is a no-op); anything else
is refused as `receiver_differs`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy.orm import Session

from agenthub.clock import Clock, SystemClock
from agenthub.hubcore import repository as repo
from agenthub.hubcore.bundle_rules import SCHEMA, ValidBundle, validate_bundle
from agenthub.hubcore.canonical import (
    Row,
    canonical_timestamp,
    hash_normalized,
    parse_timestamp,
    receipt_key,
    snapshot_hash,
)
from agenthub.hubcore.errors import SnapshotRejected
from agenthub.hubcore.models import SourceCursor
from agenthub.hubcore.store import Database

READ_MODE = "snapshot-pilot"

Outcome = Literal["valid", "imported", "unchanged"]


@dataclass(frozen=True)
class ImportResult:
    """What an import did (`imported`, `unchanged`) or would do (`valid`)."""

    outcome: Outcome
    content_hash: str
    source_instance: str
    messages: int
    receipts: int
    tombstones: int


def _differences(stored: list[Row], incoming: list[Row], key: Callable[[Row], str]) -> list[str]:
    have = {key(r): r for r in stored}
    want = {key(r): r for r in incoming}
    return sorted(k for k in have.keys() | want.keys() if have.get(k) != want.get(k))


def _receiver_matches(session: Session, valid: ValidBundle) -> None:
    """Refuse unless the receiver holds exactly this bundle (then the import is a no-op)."""
    stored_messages = list(repo.stored_messages(session))
    stored_receipts = list(repo.stored_receipts(session))
    stored_tombstones = list(repo.stored_tombstones(session))
    differing = (
        _differences(stored_messages, valid.messages, lambda r: str(r["id"]))
        + _differences(stored_receipts, valid.receipts, receipt_key)
        + _differences(stored_tombstones, valid.tombstones, lambda r: str(r["message_id"]))
    )
    cursors = repo.stored_cursors(session)
    foreign = [c.source_instance for c in cursors if c.source_instance != valid.source["instance"]]
    if not any(c.source_instance == valid.source["instance"] for c in cursors):
        foreign.append(f"no cursor for {valid.source['instance']}")
    if differing or foreign:
        raise SnapshotRejected(
            "receiver_differs",
            "the receiver already holds different content; nothing was changed",
            rows=foreign + differing,
            hint="import only into an empty hub-core database; never overwrite imported history",
        )


def import_snapshot(
    session: Session,
    bundle: Any,
    *,
    expected_hash: str,
    apply: bool = False,
    clock: Clock | None = None,
    progress: Callable[[int], None] | None = None,
) -> ImportResult:
    """Validate `bundle` (and, with `apply=True`, import it) inside the caller's transaction.

    The receiver must be empty (import) or hold exactly this bundle (no-op);
    anything else is refused with no change. Never commits.
    """
    valid = validate_bundle(bundle, expected_hash=expected_hash)
    if apply:
        repo.lock_projection(session)
    counts = repo.row_counts(session)

    def result(outcome: Outcome) -> ImportResult:
        return ImportResult(
            outcome=outcome,
            content_hash=valid.content_hash,
            source_instance=valid.source["instance"],
            messages=len(valid.messages),
            receipts=len(valid.receipts),
            tombstones=len(valid.tombstones),
        )

    if any(counts.values()):
        _receiver_matches(session, valid)
        return result("unchanged")
    if not apply:
        return result("valid")
    repo.insert_messages(session, valid.messages, progress)
    repo.insert_receipts(session, valid.receipts, progress)
    repo.insert_tombstones(session, valid.tombstones)
    now = (clock or SystemClock()).now()
    repo.insert_cursor(
        session,
        SourceCursor(
            source_instance=valid.source["instance"],
            cursor=valid.source["cursor"],
            high_water=valid.source["cursor"],
            last_source_time=parse_timestamp(
                canonical_timestamp(valid.source["source_time"], "source_time")
            ),
            last_success_at=now,
            mode=READ_MODE,
            content_hash=valid.content_hash,
        ),
    )
    return result("imported")


__all__ = [
    "SCHEMA",
    "ImportResult",
    "import_into",
    "import_snapshot",
    "receiver_hashes",
    "snapshot_hash",
    "validate_bundle",
]


def import_into(
    db: Database,
    bundle: Any,
    *,
    expected_hash: str,
    apply: bool,
    clock: Clock | None = None,
    progress: Callable[[int], None] | None = None,
) -> ImportResult:
    """`import_snapshot` in a transaction of its own: what the CLI runs.

    Validation runs read-only; an apply commits only if every rule passed, and
    then refreshes the planner's statistics in a second transaction.
    """
    unit = db.write() if apply else db.read_only()
    with unit as session:
        result = import_snapshot(
            session,
            bundle,
            expected_hash=expected_hash,
            apply=apply,
            clock=clock,
            progress=progress,
        )
    if result.outcome == "imported":
        with db.write() as session:
            repo.refresh_statistics(session)
    return result


def receiver_hashes(session: Session) -> dict[str, str]:
    """The hashes of what the receiver holds now, in the bundle's terms."""
    return {
        "content_hash": hash_normalized(repo.stored_messages(session), lambda r: str(r["id"])),
        "receipts_hash": hash_normalized(repo.stored_receipts(session), receipt_key),
        "tombstones_hash": hash_normalized(
            repo.stored_tombstones(session), lambda r: str(r["message_id"])
        ),
    }
