"""The one-time import of a snapshot bundle into an empty hub-core.

`import_snapshot(session, bundle, expected_hash=..., apply=False)` validates a
bundle against every rule of `bundle_rules` and against the receiver, and,
only with `apply=True`, writes it inside the caller's transaction (the caller
commits on success and rolls back on any exception). The receiver must be
empty, or hold exactly this bundle (then the import is a no-op); anything else
is refused as `receiver_differs`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sqlalchemy.orm import Session

from agenthub.clock import Clock, SystemClock
from agenthub.hubcore import bundlefile
from agenthub.hubcore import repository as repo
from agenthub.hubcore.bundle_objectreader import read_object
from agenthub.hubcore.bundle_rules import (
    BUNDLE_PARTS,
    SCHEMA,
    ValidBundle,
    check_head,
    closure_refused,
    validate_bundle,
)
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
from agenthub.hubcore.row_stream import RowsOutOfOrder, RowStream, StreamedBundle
from agenthub.hubcore.staged_swap import ProjectionLoader, indexes_built_after
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
    _refuse_differences(session, valid.source["instance"], differing)


def _refuse_differences(session: Session, instance: str, differing: list[str]) -> None:
    cursors = repo.stored_cursors(session)
    foreign = [c.source_instance for c in cursors if c.source_instance != instance]
    if not any(c.source_instance == instance for c in cursors):
        foreign.append(f"no cursor for {instance}")
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
    repo.insert_cursor(session, _cursor(valid.source, valid.content_hash, clock))
    return result("imported")


def _cursor(source: dict[str, Any], content_hash: str, clock: Clock | None) -> SourceCursor:
    return SourceCursor(
        source_instance=source["instance"],
        cursor=source["cursor"],
        high_water=source["cursor"],
        last_source_time=parse_timestamp(canonical_timestamp(source["source_time"], "source_time")),
        last_success_at=(clock or SystemClock()).now(),
        mode=READ_MODE,
        content_hash=content_hash,
    )


__all__ = [
    "SCHEMA",
    "ImportResult",
    "import_file",
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


# -- a bundle file, streamed --------------------------------------------------------------

DIFFERENCES_LISTED = 1_000
# The rules needing every id, in the order the v1 rules apply them.
CLOSURE_CHECKS: tuple[tuple[str, Callable[[Session], list[str]]], ...] = (
    ("missing_thread_roots", lambda s: repo.dangling_links(s, "thread_id")),
    ("thread_cycles", repo.unrooted_messages),
    ("missing_supersedes_targets", lambda s: repo.dangling_links(s, "supersedes_id")),
    ("orphan_receipts", repo.orphan_receipts),
    ("tombstoned_rows_present", repo.tombstoned_messages),
)
STORED: dict[str, Callable[[Session], Iterator[Row]]] = {
    "messages": repo.stored_messages,
    "receipts": repo.stored_receipts,
    "tombstones": repo.stored_tombstones,
}


class _Comparer:
    """The bundle's rows against the receiver's, part by part, both in key order: the
    keys that differ (at most DIFFERENCES_LISTED named, all counted)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.part: str | None = None
        self.seen: set[str] = set()
        self.stored: Iterator[Row] = iter(())
        self.pending: Row | None = None
        self.key: Callable[[Row], str] = str
        self.differing: list[str] = []
        self.count = 0

    def _differs(self, key: str) -> None:
        self.count += 1
        if len(self.differing) < DIFFERENCES_LISTED:
            self.differing.append(key if self.part == "messages" else f"{self.part} {key}")

    def _drain(self, until: str | None) -> None:
        """Every stored row before `until` (None: all that are left) is not in the bundle."""
        while self.pending is not None and (until is None or self.key(self.pending) < until):
            self._differs(self.key(self.pending))
            self.pending = next(self.stored, None)

    def _switch(self, part: str) -> None:
        self._drain(None)
        self.part, self.key = part, BUNDLE_PARTS[part][2]
        self.seen.add(part)
        self.stored = STORED[part](self.session)
        self.pending = next(self.stored, None)

    def add(self, part: str, row: Row) -> None:
        if part != self.part:
            self._switch(part)
        key = self.key(row)
        self._drain(key)
        if self.pending is not None and self.key(self.pending) == key:
            if self.pending != row:
                self._differs(key)
            self.pending = next(self.stored, None)
        else:
            self._differs(key)

    def finish(self) -> list[str]:
        for part in BUNDLE_PARTS:  # stored parts the bundle has no rows of
            if part not in self.seen:
                self._switch(part)
        self._drain(None)
        if self.count > len(self.differing):
            self.differing.append(f"... {self.count - len(self.differing)} more")
        return self.differing


def _stream(
    session: Session,
    items: Iterator[tuple[str, Any]],
    *,
    v1: bool,
    expected_hash: str,
    empty: bool,
) -> StreamedBundle:
    """Check every row of a bundle file as it is read (`items`: its rows, then its
    trailer, or a v1 object's head); into an empty receiver load it, over a filled one
    compare it. Raises `SnapshotRejected`; the caller rolls back."""
    rules = RowStream()
    sink: ProjectionLoader | _Comparer = ProjectionLoader(session) if empty else _Comparer(session)
    with indexes_built_after(session) if empty else nullcontext():
        for part, raw in items:
            if part == bundlefile.TRAILER:
                if not isinstance(raw, Mapping):
                    raise SnapshotRejected("malformed_bundle", "the trailer is not an object")
                if v1:
                    check_head(raw)
                streamed = rules.finish(raw, expected_hash=expected_hash)
                break
            row = rules.add(part, raw)
            if row is not None:
                sink.add(part, row)
        if isinstance(sink, ProjectionLoader):
            sink.flush()
    if isinstance(sink, ProjectionLoader):
        for code, check in CLOSURE_CHECKS:
            problems = check(session)
            if problems:
                raise closure_refused(code, problems)
    else:
        _refuse_differences(session, streamed.source["instance"], sink.finish())
    return streamed


def import_file(
    db: Database,
    path: Path,
    *,
    expected_hash: str,
    apply: bool,
    clock: Clock | None = None,
    progress: Callable[[int], None] | None = None,
) -> ImportResult:
    """Validate the bundle file at `path` (and, with `apply=True`, import it): what the
    CLI runs. A v1 file (the seed's one JSON object) is parsed incrementally, a v2 file
    line by line; either is streamed in one transaction: into an empty receiver its rows
    are checked and bulk-loaded as they are read, the rules needing every id run in SQL
    over the loaded rows, and the transaction commits only with `apply=True` once every
    rule passed (validation writes too, then rolls back: it needs the rows somewhere);
    over a filled receiver it is compared row by row and writes nothing. A filled
    receiver holding exactly the bundle passed those rules when it was imported, so they
    are not run again. `progress` is told the bytes of the file read (they add up to
    its size once the file is read).

    A v1 object whose rows are not in key order (JSON does not order them, and the seed's
    hash sorts them; every capture writes them in order) cannot be checked as it is
    read: that attempt is rolled back and the file is read whole (`import_into`)."""
    read = 0

    def counted(size: int) -> None:
        nonlocal read
        read += size
        if progress is not None:
            progress(size)

    if bundlefile.is_v2(path):
        lines = bundlefile.read_lines(path, counted)
        return _import_streamed(db, lines, False, expected_hash, apply, clock)
    try:
        return _import_streamed(db, read_object(path, counted), True, expected_hash, apply, clock)
    except RowsOutOfOrder:
        bundle = bundlefile.read_bundle(path)
        if progress is not None:
            progress(max(path.stat().st_size - read, 0))
        return import_into(db, bundle, expected_hash=expected_hash, apply=apply, clock=clock)


def _import_streamed(
    db: Database,
    items: Iterator[tuple[str, Any]],
    v1: bool,
    expected_hash: str,
    apply: bool,
    clock: Clock | None,
) -> ImportResult:
    unit = db.write() if apply else db.scratch()
    with unit as session:
        if apply:
            repo.lock_projection(session)
        empty = not any(repo.row_counts(session).values())
        streamed = _stream(session, items, v1=v1, expected_hash=expected_hash, empty=empty)
        outcome: Outcome = "unchanged" if not empty else "imported" if apply else "valid"
        if outcome == "imported":
            repo.insert_cursor(session, _cursor(streamed.source, streamed.content_hash, clock))
    if outcome == "imported":
        with db.write() as session:
            repo.refresh_statistics(session)
    return ImportResult(
        outcome=outcome,
        content_hash=streamed.content_hash,
        source_instance=streamed.source["instance"],
        messages=streamed.counts["messages"],
        receipts=streamed.counts["receipts"],
        tombstones=streamed.counts["tombstones"],
    )
