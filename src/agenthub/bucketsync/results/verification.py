"""The verification index (`results/verification_status.json`): each result's verdict.

Every promoted result is entered as `pending` (`mark_pending`), so an organizer editing
verdicts by hand (seed §9) sees what waits; the verifier (`scoring.verdicts`) or the
organizer turns entries `valid`/`invalid`. Reads treat an absent entry as `pending` too.
Every read-modify-write of the file goes through `index_edits` (`core.shared`): it holds
the named lock `INDEX_LOCK` (a Redis lock with the bus, so across workers and machines; an
flock on one data directory without it) and writes through the lease (`core.locks`: a
holder whose lease ended is refused, so it cannot put back an index that misses the next
holder's verdict), or, on S3, writes only if nobody wrote since its read
(compare-and-swap, retried on what the other writer left). Either way it re-reads the
file as stored, never the TTL'd copy. An entry is only ever inserted here, never overwritten,
and an unreadable index is never rewritten (that would erase every human verdict).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from agenthub.bucketsync.core import listing, naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.shared import Edit, edits
from agenthub.bucketsync.errors import StorageUnavailable

log = logging.getLogger(__name__)

VERIFICATION_INDEX = f"{naming.RESULTS}verification_status.json"
INDEX_LOCK = "verification index"
PENDING = "pending"


def verification_index(hub: Hub) -> dict[str, str]:
    """`results/verification_status.json`; unreadable or absent reads as all-pending."""
    record = hub.read_model.record(VERIFICATION_INDEX, naming.RESULTS)
    if record is None:
        return {}
    try:
        data = json.loads(record.body)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): str(v) for k, v in data.items() if v in listing.VERIFICATION_STATES}


def stored_index(hub: Hub) -> dict[str, Any] | None:
    """The index as stored now (not the TTL'd copy), values as written; `{}` when absent,
    None when it cannot be read or is not a JSON object (then nobody may rewrite it)."""
    try:
        data = hub.store.read(hub.central, VERIFICATION_INDEX)
    except StorageUnavailable:
        return None
    return parse_index(data)


def parse_index(data: bytes | None) -> dict[str, Any] | None:
    """The index's bytes as a dict (`{}` when absent); None when it is not a JSON object."""
    if data is None:
        return {}
    try:
        parsed = json.loads(data)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def index_edits(hub: Hub) -> Iterator[Edit]:
    """The passes of one read-modify-write of the index (`core.shared`: under
    `INDEX_LOCK`, or by compare-and-swap on S3)."""
    return edits(hub, hub.central, VERIFICATION_INDEX, INDEX_LOCK)


def encode_index(index: dict[str, Any]) -> bytes:
    return json.dumps(index, indent=2, sort_keys=True).encode()


def mark_pending(hub: Hub, filename: str) -> bool:
    """Enter a just-promoted result as `pending` unless the index already names it; True
    if it was entered. Best-effort: the result is already written, so a busy lock, an
    unreadable index or a failed write is logged, never raised (the verifier and a human
    treat a missing entry as pending all the same)."""
    try:
        for edit in index_edits(hub):
            index = parse_index(edit.data)
            if index is None:
                log.error("verification index unreadable; %s not entered as pending", filename)
                return False
            if filename in index:
                return False
            index[filename] = PENDING
            edit.write(encode_index(index))
        return True
    except StorageUnavailable as exc:
        log.warning("could not enter %s as pending: %s", filename, exc.message)
        return False
