"""What a write changed, as a bus event carries it, so the other workers patch their
listings instead of listing the folders again (each listing is a Hub API request).

    {"folders": ["inbox/"], "changes": [{"path": "inbox/a/x.md", "size": 12, "hash": "…"},
                                        {"path": "channels/c/m.md", "deleted": true}]}

The field is optional both ways: an older worker ignores `changes` and re-lists the
folders; an event without it (an older worker's, or a batch over MAX_CHANGES) is
answered by re-listing. A malformed list counts as absent.
"""

from __future__ import annotations

from collections.abc import Sequence

from agenthub.bucketsync.storage.base import FileChange

# Past this many files a write's event names its folders only: a bounded message (about
# 150 bytes a change), and a batch that large is cheaper re-listed than replayed.
MAX_CHANGES = 256


def encode(changes: Sequence[FileChange] | None) -> list[dict[str, object]] | None:
    """The wire form of `changes`, or None (send the folders only) over MAX_CHANGES or when
    a change lacks its size or hash."""
    if changes is None or len(changes) > MAX_CHANGES:
        return None
    wire: list[dict[str, object]] = []
    for change in changes:
        if change.deleted:
            wire.append({"path": change.path, "deleted": True})
        elif change.size is None or not change.content_hash:
            return None
        else:
            wire.append({"path": change.path, "size": change.size, "hash": change.content_hash})
    return wire


def decode(raw: object) -> list[FileChange] | None:
    """The changes an event carries, or None when it carries none or a malformed list."""
    if not isinstance(raw, list) or len(raw) > MAX_CHANGES:
        return None
    changes = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("path"), str):
            return None
        path, size, digest = item["path"], item.get("size"), item.get("hash")
        if item.get("deleted") is True:
            changes.append(FileChange(path, deleted=True))
        elif isinstance(size, int) and not isinstance(size, bool) and isinstance(digest, str):
            changes.append(FileChange(path, size=size, content_hash=digest))
        else:
            return None
    return changes
