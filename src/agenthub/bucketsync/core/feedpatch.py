"""Applying a change feed's batch to one folder's listing (`ReadModel.changed`)."""

from __future__ import annotations

from agenthub.bucketsync.core.contentcache import ContentCache
from agenthub.bucketsync.storage.base import FileChange, FileEntry

# How soon the feed must report a file this worker wrote for it to count as that write's
# echo (the emulator reports within milliseconds, the Hub within about a second).
ECHO_S = 10.0


def patch(
    entries: dict[str, FileEntry],
    overlay: dict[str, tuple[FileEntry, float]],
    changes: list[FileChange],
    content: ContentCache,
    now: float,
) -> bool:
    """Apply `changes` to `entries` (a listing being replaced, never one being served) and
    drop the overlay entries the feed has now confirmed or deleted. False if a change could
    not be completed (an update of a file the listing lacks, without its size or hash):
    that file is left out and the folder must be listed again."""
    complete = True
    for change in changes:
        written = overlay.pop(change.path, None)
        if change.deleted:
            entries.pop(change.path, None)
            continue
        known = entries.get(change.path)
        size = change.size if change.size is not None else (known.size if known else None)
        digest = change.content_hash or (known.content_hash if known else None)
        if size is None or not digest:
            entries.pop(change.path, None)
            complete = False
            continue
        if written is not None:
            _echo(written, size, digest, content, now)
        entries[change.path] = FileEntry(change.path, size, digest)
    return complete


def _echo(
    written: tuple[FileEntry, float], size: int, digest: str, content: ContentCache, now: float
) -> None:
    """The feed reports a file this worker wrote moments ago, under the bucket's own hash
    (Xet, not our sha256): the document parsed at write time serves it, unread. Another
    writer replacing it with bytes of the same size within ECHO_S would be taken for the
    echo; the central bucket has one writer, so that takes an admin's edit racing ours by
    less than the feed's delay."""
    entry, inserted_at = written
    if entry.size != size or entry.content_hash == digest or now - inserted_at > ECHO_S:
        return
    document = content.get(entry.content_hash)
    if document is not None:
        content.put(digest, document, 2 * size)
