"""The per-row rules of a bundle file, checked as it is read so memory holds no rows.

`RowStream` is fed one raw row at a time, parts in order (messages, receipts,
tombstones), each part's rows strictly in key order: an equal key is a duplicate
(`duplicate_*`), a smaller one `RowsOutOfOrder` (`malformed_bundle`). Rows are
normalized (`malformed_*`) and hashed on the way, and `finish` checks the declared
counts, hashes and provenance (`count_mismatch`, `hash_mismatch`, `absent_provenance`),
the same codes `bundle_rules.validate_bundle` gives a bundle in memory. The rules that
need every id at once (thread roots and cycles, supersedes targets, orphan receipts,
tombstoned rows present) are `bundle_import`'s, in SQL over the rows it loaded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agenthub.contracts.inbox_feed import canonical_bytes
from agenthub.hubcore.bundle_rules import (
    BUNDLE_PARTS,
    PART_RULES,
    check_declared,
    check_operators_hash,
    check_provenance,
    id_of,
    repeated,
    require,
    unreadable,
)
from agenthub.hubcore.canonical import MalformedRow, Row, canonical_timestamp
from agenthub.hubcore.errors import SnapshotRejected


class RowsOutOfOrder(SnapshotRejected):
    """A part's rows, or the parts, not in the order a streamed check needs
    (`malformed_bundle`). A v2 file must be in that order; a v1 object need not (its
    reader then checks it whole)."""


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
            raise SnapshotRejected(
                "malformed_bundle",
                f"the bundle holds a row of unknown part {part!r:.30}",
                hint="a bundle's parts are messages, receipts and tombstones; recapture it",
            )
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
            raise unreadable(PART_RULES[part][1], state.bad, state.first_reason)
        if state.repeated:
            raise repeated(part, state.repeated)

    def add(self, part: str, raw: Any) -> Row | None:
        state = self._enter(part)
        normalize, _, id_field, _ = PART_RULES[part]
        try:
            row = normalize(raw)
        except MalformedRow as exc:
            if not state.bad:
                state.first_reason = str(exc)
            state.bad.append(id_of(raw, state.count + len(state.bad), id_field))
            return None
        key = BUNDLE_PARTS[part][2](row)
        if state.count and key <= state.last:
            if key < state.last:
                raise _malformed_stream(f"{part} rows out of key order at {key!r:.80}")
            if key not in state.repeated:
                state.repeated.append(key)
        text = canonical_bytes(row)
        state.sha.update(b"," + text if state.count else text)
        state.count += 1
        state.last = key
        return row

    def finish(self, trailer: Mapping[str, Any], *, expected_hash: str) -> StreamedBundle:
        """Every rule on the trailer: provenance, and each part's count and hash."""
        self._enter(self._order[-1])
        self._close()
        source = check_provenance(trailer)
        counts: dict[str, int] = {}
        hashes: dict[str, str] = {}
        for part, (count_key, hash_key, _) in BUNDLE_PARTS.items():
            declared_count = require(trailer, count_key, int)
            declared_hash = require(trailer, hash_key, str)
            state = self._states[part]
            sha = state.sha.copy()
            sha.update(b"]")
            hashes[part] = sha.hexdigest()
            counts[part] = state.count
            check_declared(part, declared_count, declared_hash, state.count, hashes[part])
            if part == "messages":
                check_operators_hash(expected_hash, hashes[part])
        return StreamedBundle(
            source=source,
            captured_at=canonical_timestamp(trailer["captured_at"], "captured_at"),
            counts=counts,
            hashes=hashes,
        )


def _malformed_stream(problem: str) -> RowsOutOfOrder:
    return RowsOutOfOrder(
        "malformed_bundle",
        f"the bundle holds {problem}",
        hint="a captured bundle holds each part's rows in key order, parts in order; recapture it",
    )
