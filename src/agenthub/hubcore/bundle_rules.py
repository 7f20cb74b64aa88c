"""The rules a snapshot bundle must pass before it is imported, receiver aside.

`validate_bundle(bundle, expected_hash=...)` checks a
`hub-core.statehub-inbox-snapshot.v1` bundle and returns its rows canonical and
ordered roots-first, or raises `SnapshotRejected` with a stable code and the
offending row ids:

    unsupported_schema / malformed_bundle   not a v1 bundle
    absent_provenance                       no source instance, cursor, time or captor
    malformed_rows / malformed_receipts / malformed_tombstones
    duplicate_ids / duplicate_receipts
    count_mismatch / hash_mismatch          declared vs. actual, and vs. the operator's hash
    missing_thread_roots / thread_cycles / missing_supersedes_targets
    orphan_receipts / tombstoned_rows_present

The rule that needs the receiver (`receiver_differs`) is `bundle_import`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agenthub.contracts.inbox_feed import CursorError, decode_cursor
from agenthub.hubcore.canonical import (
    MalformedRow,
    Row,
    canonical_timestamp,
    hash_normalized,
    normalize_message,
    normalize_receipt,
    normalize_tombstone,
    receipt_key,
)
from agenthub.hubcore.errors import SnapshotRejected

SCHEMA = "hub-core.statehub-inbox-snapshot.v1"


@dataclass
class ValidBundle:
    """A bundle that passed every rule, its rows canonical and ordered roots-first."""

    source: dict[str, Any]
    captured_at: str
    messages: list[Row]
    receipts: list[Row]
    tombstones: list[Row]
    content_hash: str
    receipts_hash: str
    tombstones_hash: str
    extra: dict[str, Any] = field(default_factory=dict)


def _id_of(row: Any, position: int, key: str = "id") -> str:
    if isinstance(row, Mapping) and isinstance(row.get(key), str) and row.get(key):
        return str(row[key])
    return f"#{position}"


def _require(bundle: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = bundle.get(key)
    if key not in bundle or isinstance(value, bool) or not isinstance(value, kind):
        raise SnapshotRejected(
            "malformed_bundle",
            f"bundle field {key!r} is missing or not a {getattr(kind, '__name__', kind)}",
            hint="rebuild the bundle with `agenthub hubcore capture`; it writes every field",
        )
    return value


def _check_provenance(bundle: Mapping[str, Any]) -> dict[str, Any]:
    source = bundle.get("source")
    hint = (
        "a bundle must say where it came from: source.instance, source.cursor (v1:<n>), "
        "source.source_time and source.captured_by; recapture with `agenthub hubcore capture`"
    )
    if not isinstance(source, Mapping):
        raise SnapshotRejected("absent_provenance", "bundle has no source object", hint=hint)
    missing = [
        key
        for key in ("instance", "cursor", "source_time", "captured_by")
        if not isinstance(source.get(key), str) or not source.get(key)
    ]
    if missing:
        raise SnapshotRejected("absent_provenance", f"source lacks {', '.join(missing)}", hint=hint)
    try:
        decode_cursor(source["cursor"])
    except CursorError:
        raise SnapshotRejected(
            "absent_provenance", f"source.cursor {source['cursor']!r:.40} is not v1:<n>", hint=hint
        ) from None
    try:
        canonical_timestamp(source["source_time"], "source.source_time")
        canonical_timestamp(bundle.get("captured_at"), "captured_at")
    except MalformedRow as exc:
        raise SnapshotRejected("absent_provenance", str(exc), hint=hint) from None
    return dict(source)


def _normalize_all(
    rows: Sequence[Any], normalize: Callable[[Any], Row], code: str, key: str
) -> list[Row]:
    good: list[Row] = []
    bad: list[str] = []
    reasons: list[str] = []
    for position, row in enumerate(rows):
        try:
            good.append(normalize(row))
        except MalformedRow as exc:
            bad.append(_id_of(row, position, key))
            reasons.append(str(exc))
    if bad:
        raise SnapshotRejected(
            code,
            f"{len(bad)} row(s) cannot be read (first problem: {reasons[0]})",
            rows=bad,
            hint="every row needs exactly the MessageRead fields plus revision, UTC timestamps "
            "and UUID ids; recapture from State Hub rather than editing the bundle",
        )
    return good


def _duplicates(keys: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    dupes: list[str] = []
    for key in keys:
        if key in seen and key not in dupes:
            dupes.append(key)
        seen.add(key)
    return dupes


def _check_count_and_hash(
    what: str, declared_count: int, declared_hash: str, rows: list[Row], key: Callable[[Row], str]
) -> str:
    if declared_count != len(rows):
        raise SnapshotRejected(
            "count_mismatch",
            f"bundle declares {declared_count} {what} but holds {len(rows)}",
            hint="the bundle is truncated or edited; recapture it",
        )
    actual = hash_normalized(rows, key)
    if actual != declared_hash:
        raise SnapshotRejected(
            "hash_mismatch",
            f"{what} hash is {actual} but the bundle declares {declared_hash:.80}",
            hint="the bundle's rows were changed after capture; recapture it",
        )
    return actual


def thread_order(messages: list[Row]) -> list[Row]:
    """Roots first, then each reply after the message its `thread_id` names.

    Refuses a `thread_id` naming no row in the bundle and any chain that loops.
    """
    by_id = {m["id"]: m for m in messages}
    missing = [
        m["id"] for m in messages if m["thread_id"] is not None and m["thread_id"] not in by_id
    ]
    if missing:
        raise SnapshotRejected(
            "missing_thread_roots",
            f"{len(missing)} message(s) name a thread root the bundle does not hold",
            rows=missing,
            hint="capture archived rows too: thread roots must travel with their replies",
        )
    depth: dict[str, int] = {}
    cyclic: list[str] = []
    for message in messages:
        path: list[str] = []
        on_path: set[str] = set()
        current: str | None = message["id"]
        while current is not None and current not in depth:
            if current in on_path:
                cyclic.extend(i for i in path if i not in cyclic)
                break
            path.append(current)
            on_path.add(current)
            current = by_id[current]["thread_id"]
        else:
            base = -1 if current is None else depth[current]
            for offset, node in enumerate(reversed(path), start=1):
                depth[node] = base + offset
            continue
        for node in path:
            depth.setdefault(node, -1)
    if cyclic:
        raise SnapshotRejected(
            "thread_cycles",
            f"{len(cyclic)} message(s) sit on a thread_id chain that loops",
            rows=cyclic,
            hint="a thread_id must lead to a root (a message with no thread_id)",
        )
    return sorted(messages, key=lambda m: (depth[m["id"]], m["id"]))


def validate_bundle(bundle: Any, *, expected_hash: str) -> ValidBundle:
    """Every bundle rule that does not need the receiver. Raises `SnapshotRejected`."""
    if not isinstance(bundle, Mapping):
        raise SnapshotRejected(
            "malformed_bundle",
            f"a bundle is a JSON object, got {type(bundle).__name__}",
            hint="pass the file `agenthub hubcore capture` wrote",
        )
    if bundle.get("schema") != SCHEMA:
        raise SnapshotRejected(
            "unsupported_schema",
            f"bundle schema is {bundle.get('schema')!r:.60}, expected {SCHEMA!r}",
            hint="this importer reads only v1 snapshot bundles",
        )
    source = _check_provenance(bundle)
    raw_messages = _require(bundle, "messages", list)
    raw_receipts = _require(bundle, "receipts", list)
    raw_tombstones = _require(bundle, "tombstones", list)
    count = _require(bundle, "count", int)
    content_hash = _require(bundle, "content_hash", str)
    receipts_count = _require(bundle, "receipts_count", int)
    receipts_digest = _require(bundle, "receipts_hash", str)
    tombstones_count = _require(bundle, "tombstones_count", int)
    tombstones_digest = _require(bundle, "tombstones_hash", str)

    messages = _normalize_all(raw_messages, normalize_message, "malformed_rows", "id")
    dupes = _duplicates([m["id"] for m in messages])
    if dupes:
        raise SnapshotRejected(
            "duplicate_ids",
            f"{len(dupes)} message id(s) occur more than once",
            rows=dupes,
            hint="a snapshot holds each message once; recapture it",
        )
    actual_hash = _check_count_and_hash(
        "messages", count, content_hash, messages, key=lambda r: str(r["id"])
    )
    if expected_hash != actual_hash:
        raise SnapshotRejected(
            "hash_mismatch",
            f"bundle content hash is {actual_hash}, but the operator expected {expected_hash:.80}",
            hint="pass the content_hash from the capture's evidence file as --expected-hash",
        )

    ids = {m["id"] for m in messages}
    ordered = thread_order(messages)
    dangling = [
        m["id"]
        for m in messages
        if m["supersedes_id"] is not None and m["supersedes_id"] not in ids
    ]
    if dangling:
        raise SnapshotRejected(
            "missing_supersedes_targets",
            f"{len(dangling)} message(s) supersede a message the bundle does not hold",
            rows=dangling,
            hint="capture every row, archived ones included",
        )

    receipts = _normalize_all(raw_receipts, normalize_receipt, "malformed_receipts", "message_id")
    receipt_dupes = _duplicates([receipt_key(r) for r in receipts])
    if receipt_dupes:
        raise SnapshotRejected(
            "duplicate_receipts",
            f"{len(receipt_dupes)} (message_id, agent) receipt key(s) occur more than once",
            rows=receipt_dupes,
            hint="a snapshot holds one receipt per message and reader; recapture it",
        )
    orphans = [receipt_key(r) for r in receipts if r["message_id"] not in ids]
    if orphans:
        raise SnapshotRejected(
            "orphan_receipts",
            f"{len(orphans)} receipt(s) belong to no message in the bundle",
            rows=orphans,
            hint="receipts and messages must come from the same consistent capture",
        )
    receipts_actual = _check_count_and_hash(
        "receipts", receipts_count, receipts_digest, receipts, key=receipt_key
    )

    tombstones = _normalize_all(
        raw_tombstones, normalize_tombstone, "malformed_tombstones", "message_id"
    )
    tomb_dupes = _duplicates([t["message_id"] for t in tombstones])
    if tomb_dupes:
        raise SnapshotRejected(
            "duplicate_ids",
            "tombstone id(s) occur more than once",
            rows=tomb_dupes,
            hint="recapture the bundle",
        )
    resurrected = [t["message_id"] for t in tombstones if t["message_id"] in ids]
    if resurrected:
        raise SnapshotRejected(
            "tombstoned_rows_present",
            "message(s) are both present and tombstoned",
            rows=resurrected,
            hint="a deleted message cannot be in the same snapshot; recapture it",
        )
    tombstones_actual = _check_count_and_hash(
        "tombstones",
        tombstones_count,
        tombstones_digest,
        tombstones,
        key=lambda r: str(r["message_id"]),
    )
    return ValidBundle(
        source=source,
        captured_at=canonical_timestamp(bundle["captured_at"], "captured_at"),
        messages=ordered,
        receipts=sorted(receipts, key=receipt_key),
        tombstones=tombstones,
        content_hash=actual_hash,
        receipts_hash=receipts_actual,
        tombstones_hash=tombstones_actual,
    )
