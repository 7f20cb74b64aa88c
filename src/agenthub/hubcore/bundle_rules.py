"""The rules a snapshot bundle must pass before it is imported, receiver aside.

`validate_bundle(bundle, expected_hash=...)` checks a
`hub-core.statehub-inbox-snapshot.v1` bundle (one JSON object, in memory) and
returns its rows canonical and ordered roots-first, or raises `SnapshotRejected`
with a stable code and the offending row ids:

    unsupported_schema / malformed_bundle   not a v1 bundle
    absent_provenance                       no source instance, cursor, time or captor
    malformed_rows / malformed_receipts / malformed_tombstones
    duplicate_ids / duplicate_receipts
    count_mismatch / hash_mismatch          declared vs. actual, and vs. the operator's hash
    missing_thread_roots / thread_cycles / missing_supersedes_targets
    orphan_receipts / tombstoned_rows_present

The rule that needs the receiver (`receiver_differs`) is `bundle_import`'s.

A bundle file (v1 or v2, see `bundlefile`) is checked as it is read, in bounded
memory, by `row_stream.RowStream` with the same codes; the rules here that check a
bundle's fields other than its rows (`check_head`) serve both.
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
SCHEMA_V2 = "hub-core.statehub-inbox-snapshot.v2"

# part -> (its count field, its hash field, the key its rows are ordered and hashed by)
BUNDLE_PARTS: dict[str, tuple[str, str, Callable[[Row], str]]] = {
    "messages": ("count", "content_hash", lambda r: str(r["id"])),
    "receipts": ("receipts_count", "receipts_hash", receipt_key),
    "tombstones": ("tombstones_count", "tombstones_hash", lambda r: str(r["message_id"])),
}
# The top-level fields of a v1 bundle besides its parts' rows.
HEAD_FIELDS = frozenset(
    ("schema", "source", "captured_at", *(f for c, h, _ in BUNDLE_PARTS.values() for f in (c, h)))
)
# part -> (its normalizer, the code for an unreadable row, the id field named, the
# code for a repeated key)
PART_RULES: dict[str, tuple[Callable[[Any], Row], str, str, str]] = {
    "messages": (normalize_message, "malformed_rows", "id", "duplicate_ids"),
    "receipts": (normalize_receipt, "malformed_receipts", "message_id", "duplicate_receipts"),
    "tombstones": (normalize_tombstone, "malformed_tombstones", "message_id", "duplicate_ids"),
}


# code -> (what the rows are, the hint): the rules that need every id of the bundle
CLOSURE_RULES: dict[str, tuple[str, str]] = {
    "missing_thread_roots": (
        "message(s) name a thread root the bundle does not hold",
        "capture archived rows too: thread roots must travel with their replies",
    ),
    "thread_cycles": (
        "message(s) sit on a thread_id chain that loops",
        "a thread_id must lead to a root (a message with no thread_id)",
    ),
    "missing_supersedes_targets": (
        "message(s) supersede a message the bundle does not hold",
        "capture every row, archived ones included",
    ),
    "orphan_receipts": (
        "receipt(s) belong to no message in the bundle",
        "receipts and messages must come from the same consistent capture",
    ),
    "tombstoned_rows_present": (
        "message(s) are both present and tombstoned",
        "a deleted message cannot be in the same snapshot; recapture it",
    ),
}


def closure_refused(code: str, rows: list[str]) -> SnapshotRejected:
    what, hint = CLOSURE_RULES[code]
    return SnapshotRejected(code, f"{len(rows)} {what}", rows=rows, hint=hint)


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


def id_of(row: Any, position: int, key: str = "id") -> str:
    if isinstance(row, Mapping) and isinstance(row.get(key), str) and row.get(key):
        return str(row[key])
    return f"#{position}"


def require(bundle: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = bundle.get(key)
    if key not in bundle or isinstance(value, bool) or not isinstance(value, kind):
        raise SnapshotRejected(
            "malformed_bundle",
            f"bundle field {key!r} is missing or not a {getattr(kind, '__name__', kind)}",
            hint="rebuild the bundle with `agenthub hubcore capture`; it writes every field",
        )
    return value


def check_provenance(bundle: Mapping[str, Any]) -> dict[str, Any]:
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


def check_schema(bundle: Mapping[str, Any]) -> None:
    if bundle.get("schema") != SCHEMA:
        raise SnapshotRejected(
            "unsupported_schema",
            f"bundle schema is {bundle.get('schema')!r:.60}, expected {SCHEMA!r}",
            hint="this importer reads v1 and v2 snapshot bundles; recapture with "
            "`agenthub hubcore capture`",
        )


def check_head(bundle: Mapping[str, Any]) -> dict[str, Any]:
    """The rules on a v1 bundle's fields other than its rows and their counts and hashes:
    schema, provenance, each part a list. Its source."""
    check_schema(bundle)
    source = check_provenance(bundle)
    for part in BUNDLE_PARTS:
        require(bundle, part, list)
    return source


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
            bad.append(id_of(row, position, key))
            reasons.append(str(exc))
    if bad:
        raise unreadable(code, bad, reasons[0])
    return good


def unreadable(code: str, bad: list[str], first_reason: str) -> SnapshotRejected:
    return SnapshotRejected(
        code,
        f"{len(bad)} row(s) cannot be read (first problem: {first_reason})",
        rows=bad,
        hint="every row needs exactly the MessageRead fields plus revision, UTC timestamps "
        "and UUID ids; recapture from State Hub rather than editing the bundle",
    )


def _duplicates(keys: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    dupes: list[str] = []
    for key in keys:
        if key in seen and key not in dupes:
            dupes.append(key)
        seen.add(key)
    return dupes


def repeated(part: str, keys: list[str]) -> SnapshotRejected:
    code = PART_RULES[part][3]
    if part == "messages":
        message, hint = "message id(s) occur more than once", "a snapshot holds each message once"
    elif part == "receipts":
        message = "(message_id, agent) receipt key(s) occur more than once"
        hint = "a snapshot holds one receipt per message and reader"
    else:
        return SnapshotRejected(
            code, "tombstone id(s) occur more than once", rows=keys, hint="recapture the bundle"
        )
    return SnapshotRejected(code, f"{len(keys)} {message}", rows=keys, hint=f"{hint}; recapture it")


def _check_count_and_hash(
    what: str, declared_count: int, declared_hash: str, rows: list[Row], key: Callable[[Row], str]
) -> str:
    actual = hash_normalized(rows, key)
    check_declared(what, declared_count, declared_hash, len(rows), actual)
    return actual


def check_declared(
    what: str, declared_count: int, declared_hash: str, count: int, actual_hash: str
) -> None:
    if declared_count != count:
        raise SnapshotRejected(
            "count_mismatch",
            f"bundle declares {declared_count} {what} but holds {count}",
            hint="the bundle is truncated or edited; recapture it",
        )
    if actual_hash != declared_hash:
        raise SnapshotRejected(
            "hash_mismatch",
            f"{what} hash is {actual_hash} but the bundle declares {declared_hash:.80}",
            hint="the bundle's rows were changed after capture; recapture it",
        )


def check_operators_hash(expected_hash: str, actual_hash: str) -> None:
    if expected_hash != actual_hash:
        raise SnapshotRejected(
            "hash_mismatch",
            f"bundle content hash is {actual_hash}, but the operator expected {expected_hash:.80}",
            hint="pass the content_hash from the capture's evidence file as --expected-hash",
        )


def thread_order(messages: list[Row]) -> list[Row]:
    """Roots first, then each reply after the message its `thread_id` names.

    Refuses a `thread_id` naming no row in the bundle and any chain that loops.
    """
    by_id = {m["id"]: m for m in messages}
    missing = [
        m["id"] for m in messages if m["thread_id"] is not None and m["thread_id"] not in by_id
    ]
    if missing:
        raise closure_refused("missing_thread_roots", missing)
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
        raise closure_refused("thread_cycles", cyclic)
    return sorted(messages, key=lambda m: (depth[m["id"]], m["id"]))


def validate_bundle(bundle: Any, *, expected_hash: str) -> ValidBundle:
    """Every bundle rule that does not need the receiver. Raises `SnapshotRejected`."""
    if not isinstance(bundle, Mapping):
        raise SnapshotRejected(
            "malformed_bundle",
            f"a bundle is a JSON object, got {type(bundle).__name__}",
            hint="pass the file `agenthub hubcore capture` wrote",
        )
    source = check_head(bundle)
    raw_messages, raw_receipts, raw_tombstones = (bundle[part] for part in BUNDLE_PARTS)
    count = require(bundle, "count", int)
    content_hash = require(bundle, "content_hash", str)
    receipts_count = require(bundle, "receipts_count", int)
    receipts_digest = require(bundle, "receipts_hash", str)
    tombstones_count = require(bundle, "tombstones_count", int)
    tombstones_digest = require(bundle, "tombstones_hash", str)

    messages = _normalize_all(raw_messages, normalize_message, "malformed_rows", "id")
    dupes = _duplicates([m["id"] for m in messages])
    if dupes:
        raise repeated("messages", dupes)
    actual_hash = _check_count_and_hash(
        "messages", count, content_hash, messages, key=lambda r: str(r["id"])
    )
    check_operators_hash(expected_hash, actual_hash)

    ids = {m["id"] for m in messages}
    ordered = thread_order(messages)
    dangling = [
        m["id"]
        for m in messages
        if m["supersedes_id"] is not None and m["supersedes_id"] not in ids
    ]
    if dangling:
        raise closure_refused("missing_supersedes_targets", dangling)

    receipts = _normalize_all(raw_receipts, normalize_receipt, "malformed_receipts", "message_id")
    receipt_dupes = _duplicates([receipt_key(r) for r in receipts])
    if receipt_dupes:
        raise repeated("receipts", receipt_dupes)
    orphans = [receipt_key(r) for r in receipts if r["message_id"] not in ids]
    if orphans:
        raise closure_refused("orphan_receipts", orphans)
    receipts_actual = _check_count_and_hash(
        "receipts", receipts_count, receipts_digest, receipts, key=receipt_key
    )

    tombstones = _normalize_all(
        raw_tombstones, normalize_tombstone, "malformed_tombstones", "message_id"
    )
    tomb_dupes = _duplicates([t["message_id"] for t in tombstones])
    if tomb_dupes:
        raise repeated("tombstones", tomb_dupes)
    resurrected = [t["message_id"] for t in tombstones if t["message_id"] in ids]
    if resurrected:
        raise closure_refused("tombstoned_rows_present", resurrected)
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
