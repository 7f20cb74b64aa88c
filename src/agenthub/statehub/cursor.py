"""Feed cursors as State Hub answers them: the contract's codec, its refusals as HTTP errors.

A malformed cursor is a 400; a cursor of another contract version is a 409
(contract §8), so the consumer re-snapshots.
"""

from __future__ import annotations

from agenthub.contracts import inbox_feed
from agenthub.contracts.inbox_feed import CONTRACT, CURSOR_VERSION, encode_cursor
from agenthub.statehub.errors import MalformedCursor, ResnapshotConflict

__all__ = ["CONTRACT", "decode", "encode"]

encode = encode_cursor


def decode(cursor: str) -> int:
    """The revision in a `v1:` cursor; 409 for another version, 400 for anything malformed."""
    try:
        return inbox_feed.decode_cursor(cursor)
    except inbox_feed.ForeignCursor as exc:
        raise ResnapshotConflict(
            f"cursor {cursor!r} belongs to contract version {exc.version}, "
            f"this feed serves {CURSOR_VERSION}",
            hint="take a new snapshot from GET /messages/feed/snapshot and follow from its cursor",
        ) from None
    except inbox_feed.MalformedCursor:
        raise MalformedCursor(
            f"malformed cursor {cursor!r}",
            hint="pass a cursor exactly as a snapshot or feed page returned it (e.g. 'v1:0')",
        ) from None
