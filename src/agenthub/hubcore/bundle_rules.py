"""The rules a snapshot bundle must pass before it is imported, receiver aside.

`validate_bundle(bundle, expected_hash=...)` checks a
`hub-core.statehub-inbox-snapshot.v1` bundle (one JSON object, read whole) and
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

A v2 bundle (JSON Lines, see `bundlefile`) is checked as it is read, in bounded
memory, by `RowStream`: each part's rows must arrive strictly in key order (an
equal key is a duplicate, a smaller one `malformed_bundle`), are normalized and
hashed on the way, and the trailer's counts, hashes and provenance are checked
at its end. The rules that need every id at once (thread roots and cycles,
supersedes targets, orphan receipts, tombstoned rows present) are `bundle_import`'s,
in SQL over the rows it loaded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agenthub.contracts.inbox_feed import CursorError, canonical_bytes, decode_cursor
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
        raise _unreadable(code, bad, reasons[0])
    return good


def _unreadable(code: str, bad: list[str], first_reason: str) -> SnapshotRejected:
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


def _repeated(part: str, keys: list[str]) -> SnapshotRejected:
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
    _check_declared(what, declared_count, declared_hash, len(rows), actual)
    return actual


def _check_declared(
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


def _check_operators_hash(expected_hash: str, actual_hash: str) -> None:
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
        raise _repeated("messages", dupes)
    actual_hash = _check_count_and_hash(
        "messages", count, content_hash, messages, key=lambda r: str(r["id"])
    )
    _check_operators_hash(expected_hash, actual_hash)

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
        raise _repeated("receipts", receipt_dupes)
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
        raise _repeated("tombstones", tomb_dupes)
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


@dataclass
class _PartState:
    sha: Any = field(default_factory=lambda: hashlib.sha256(b"["))
    count: int = 0
    last: str = ""
    bad: list[str] = field(default_factory=list)
    first_reason: str = ""
    repeated: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class StreamedBundle:
    """What the trailer of a streamed bundle declared, once every rule on it passed."""

    source: dict[str, Any]
    captured_at: str
    counts: dict[str, int]
    hashes: dict[str, str]

    @property
    def content_hash(self) -> str:
        return self.hashes["messages"]


class RowStream:
    """The per-row rules of a v2 bundle, fed one row at a time (see the module's doc).

    `add(part, raw)` returns the canonical row, or None for a row that cannot be read
    (all of a part's unreadable rows are named once the part ends); `finish(trailer,
    expected_hash=...)` checks the trailer. Memory holds one part's problems, not rows.
    """

    def __init__(self) -> None:
        self._order = tuple(BUNDLE_PARTS)
        self._index = -1
        self._states: dict[str, _PartState] = {}

    @property
    def part(self) -> str | None:
        return self._order[self._index] if self._index >= 0 else None

    def _enter(self, part: str) -> _PartState:
        if part not in BUNDLE_PARTS:
            raise _malformed_stream(f"a row of unknown part {part!r:.30}")
        index = self._order.index(part)
        if index < self._index:
            raise _malformed_stream(f"a {part} row after the {self.part} rows")
        while self._index < index:
            self._close()
            self._index += 1
            self._states[self._order[self._index]] = _PartState()
        return self._states[part]

    def _close(self) -> None:
        if self._index < 0:
            return
        part = self._order[self._index]
        state = self._states[part]
        if state.bad:
            raise _unreadable(PART_RULES[part][1], state.bad, state.first_reason)
        if state.repeated:
            raise _repeated(part, state.repeated)

    def add(self, part: str, raw: Any) -> Row | None:
        state = self._enter(part)
        normalize, _, id_field, _ = PART_RULES[part]
        try:
            row = normalize(raw)
        except MalformedRow as exc:
            if not state.bad:
                state.first_reason = str(exc)
            state.bad.append(_id_of(raw, state.count + len(state.bad), id_field))
            return None
        key = BUNDLE_PARTS[part][2](row)
        if state.count and key <= state.last:
            if key < state.last:
                raise _malformed_stream(f"{part} rows out of key order at {key!r:.80}")
            if key not in state.repeated:
                state.repeated.append(key)
        text = canonical_bytes(row)
        if state.count:
            state.sha.update(b",")
        state.sha.update(text)
        state.count += 1
        state.last = key
        return row

    def finish(self, trailer: Mapping[str, Any], *, expected_hash: str) -> StreamedBundle:
        """Every rule on the trailer: provenance, and each part's count and hash."""
        self._enter(self._order[-1])
        self._close()
        source = _check_provenance(trailer)
        counts: dict[str, int] = {}
        hashes: dict[str, str] = {}
        for part, (count_key, hash_key, _) in BUNDLE_PARTS.items():
            declared_count = _require(trailer, count_key, int)
            declared_hash = _require(trailer, hash_key, str)
            state = self._states[part]
            sha = state.sha.copy()
            sha.update(b"]")
            hashes[part] = sha.hexdigest()
            counts[part] = state.count
            _check_declared(part, declared_count, declared_hash, state.count, hashes[part])
            if part == "messages":
                _check_operators_hash(expected_hash, hashes[part])
        return StreamedBundle(
            source=source,
            captured_at=canonical_timestamp(trailer["captured_at"], "captured_at"),
            counts=counts,
            hashes=hashes,
        )


def _malformed_stream(problem: str) -> SnapshotRejected:
    return SnapshotRejected(
        "malformed_bundle",
        f"the bundle holds {problem}",
        hint="a v2 bundle holds each part's rows in key order, parts in order; recapture it",
    )
