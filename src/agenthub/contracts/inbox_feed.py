"""The State Hub inbox change feed, contract `statehub.inbox-feed.v1`, as both sides speak it.

State Hub serves it (`statehub.position`, `statehub.feed`, `statehub.snapshot`);
hub-core reads it (`hubcore.feedpage`, `hubcore.snapshot_pages`,
`hubcore.feed_snapshot`, `hubcore.capture`). Everything
here is on the wire and therefore versioned with the contract:

* the contract name;
* the cursor codec: `v1:<revision>`, a revision being a PostgreSQL bigint;
* the field lists of each row shape, in the order State Hub emits them;
* the snapshot parts and `content_hash`: sha256 of canonical JSON of
  `{"messages":[…],"receipts":[…],"tombstones":[…]}`, rows in key order.

Errors are plain `ValueError`s; each service turns them into its own error.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

try:  # optional: this module keeps to the standard library (see canonical_bytes)
    import orjson
except ImportError:  # pragma: no cover - agenthub itself depends on orjson
    orjson = None  # type: ignore[assignment]

CONTRACT = "statehub.inbox-feed.v1"
CURSOR_VERSION = "v1"
MAX_REVISION = 2**63 - 1
# A version prefix and a bigint revision, the whole string, ASCII digits only
# (`\d` would take any Unicode digit, and `$` a trailing newline).
_CURSOR = re.compile(r"(v[0-9]{1,4}):([0-9]{1,19})")

MESSAGE_FIELDS = (
    "id",
    "from_agent",
    "to_agent",
    "subject",
    "body",
    "thread_id",
    "read_at",
    "archived_at",
    "kind",
    "expires_at",
    "supersedes_id",
    "created_at",
    "revision",
)
RECEIPT_FIELDS = ("message_id", "agent", "delivered_at", "read_at", "acknowledged_at", "revision")
TOMBSTONE_FIELDS = ("message_id", "revision", "deleted_at", "reason")
RECEIPT_TOMBSTONE_FIELDS = ("message_id", "agent", "revision", "deleted_at")

# Where the source stands; every snapshot and page carries these.
POSITION_FIELDS = (
    "contract",
    "source_instance",
    "source_epoch",
    "source_time",
    "high_water",
    "compacted_before",
)
# The snapshot's row lists, in the order they are served; the paged form names
# each row's list in its `part`.
SNAPSHOT_PARTS = ("messages", "receipts", "tombstones", "receipt_tombstones")
# The parts `content_hash` covers (receipt tombstones were added within v1, unhashed).
HASHED_PARTS = ("messages", "receipts", "tombstones")


class CursorError(ValueError):
    """A string that is not a cursor this contract version can follow."""


class MalformedCursor(CursorError):
    """Not `v<n>:<revision>` at all."""


class ForeignCursor(CursorError):
    """A well-formed cursor of another contract version."""

    def __init__(self, cursor: str, version: str) -> None:
        super().__init__(f"cursor {cursor!r} belongs to contract version {version}")
        self.version = version


def encode_cursor(revision: int) -> str:
    return f"{CURSOR_VERSION}:{revision}"


def decode_cursor(cursor: object) -> int:
    """The revision in a `v1:` cursor. Raises `MalformedCursor` or `ForeignCursor`."""
    match = _CURSOR.fullmatch(cursor) if isinstance(cursor, str) else None
    if match is None or int(match.group(2)) > MAX_REVISION:
        raise MalformedCursor(f"{cursor!r:.40} is not a cursor")
    if match.group(1) != CURSOR_VERSION:
        raise ForeignCursor(str(cursor), match.group(1))
    return int(match.group(2))


def canonical_json(value: Any) -> str:
    """The text `content_hash` is taken over: sorted keys, compact, unescaped."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_bytes(value: Any) -> bytes:
    """`canonical_json(value)` as UTF-8, by orjson: byte for byte the same text (sorted
    keys, compact, only `"`, `\\` and control characters escaped) at a tenth of the
    cost, which was a quarter of a snapshot's CPU on each side. What orjson refuses
    (an integer beyond 64 bits, a non-string key) goes through `json` as before, and so
    does everything when orjson is not installed."""
    if orjson is None:  # pragma: no cover
        return canonical_json(value).encode()
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return canonical_json(value).encode()


class ContentHasher:
    """`content_hash`, fed row by row: parts in `HASHED_PARTS` order, rows in key
    order within a part. Rows of other parts are ignored; parts with no rows
    still appear, as empty lists."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256(b"{")
        self._started = 0
        self._rows = 0

    def _start_through(self, index: int) -> None:
        while self._started <= index:
            prefix = "]," if self._started else ""
            self._sha.update(f'{prefix}"{HASHED_PARTS[self._started]}":['.encode())
            self._started += 1
            self._rows = 0

    def add(self, part: str, row: Mapping[str, Any]) -> None:
        if part in HASHED_PARTS:
            self.add_canonical(part, canonical_bytes(row))

    def add_canonical(self, part: str, text: bytes) -> None:
        """`add` for a row already encoded by `canonical_bytes`."""
        if part not in HASHED_PARTS:
            return
        self._start_through(HASHED_PARTS.index(part))
        if self._rows:
            self._sha.update(b",")
        self._sha.update(text)
        self._rows += 1

    def finish(self) -> str:
        self._start_through(len(HASHED_PARTS) - 1)
        self._sha.update(b"]}")
        return self._sha.hexdigest()
