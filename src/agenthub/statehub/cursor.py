"""Feed cursors: the opaque `v1:<revision>` string of contract §2 and §8."""

from __future__ import annotations

import re

from agenthub.statehub.errors import MalformedCursor, ResnapshotConflict

VERSION = "v1"
CONTRACT = "statehub.inbox-feed.v1"
_CURSOR_RE = re.compile(r"^(v[0-9]{1,4}):([0-9]{1,19})$")
MAX_REVISION = 2**63 - 1


def encode(revision: int) -> str:
    return f"{VERSION}:{revision}"


def decode(cursor: str) -> int:
    """The revision in a `v1:` cursor; 409 for another version, 400 for anything malformed."""
    match = _CURSOR_RE.match(cursor)
    if match is None or int(match.group(2)) > MAX_REVISION:
        raise MalformedCursor(
            f"malformed cursor {cursor!r}",
            hint="pass a cursor exactly as a snapshot or feed page returned it (e.g. 'v1:0')",
        )
    if match.group(1) != VERSION:
        raise ResnapshotConflict(
            f"cursor {cursor!r} belongs to contract version {match.group(1)}, this feed serves {VERSION}",
            hint="take a new snapshot from GET /messages/feed/snapshot and follow from its cursor",
        )
    return int(match.group(2))
