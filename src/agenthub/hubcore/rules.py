"""The per-key rules of contract §6: what a higher source revision may change.

Pure functions over canonical rows (see `canonical`), shared by the page
applier and the re-snapshot check. Each returns `None` when the transition is
justified, or a reason naming the field that is not.
"""

from __future__ import annotations

from collections.abc import Callable

from agenthub.hubcore.canonical import Row

IMMUTABLE_MESSAGE_FIELDS = (
    "id",
    "from_agent",
    "to_agent",
    "subject",
    "body",
    "kind",
    "created_at",
    "expires_at",
)
# May go from null to a value, never back and never to another value.
SET_ONCE_MESSAGE_FIELDS = ("read_at", "archived_at")
SET_ONCE_RECEIPT_FIELDS = ("delivered_at", "read_at", "acknowledged_at")
# May go from a value to null, only once the referenced message is tombstoned.
REFERENCE_FIELDS = ("thread_id", "supersedes_id")

# The revision of the tombstone for a message id, if one is known (applied or in this batch).
TombstoneLookup = Callable[[str], int | None]


def _set_once(old: Row, new: Row, fields: tuple[str, ...]) -> str | None:
    for field in fields:
        if old[field] is not None and new[field] != old[field]:
            return f"{field} may only go from null to a value ({old[field]} -> {new[field]})"
    return None


def message_transition(old: Row, new: Row, tombstone_of: TombstoneLookup) -> str | None:
    """Why `old` -> `new` (at a higher revision) is not allowed, or None if it is.

    A reference may be nulled when the message it named has a tombstone at a
    revision at or below the new row's: not only in the very same revision,
    because a later change to the referencing row (a read mark) makes the nulled
    row arrive under that later revision.
    """
    for field in IMMUTABLE_MESSAGE_FIELDS:
        if new[field] != old[field]:
            return f"{field} is immutable ({old[field]!r:.40} -> {new[field]!r:.40})"
    for field in REFERENCE_FIELDS:
        before, after = old[field], new[field]
        if before == after:
            continue
        if before is None or after is not None:
            return f"{field} may only go from a value to null ({before} -> {after})"
        deleted_at = tombstone_of(before)
        if deleted_at is None or deleted_at > new["revision"]:
            return (
                f"{field} went to null but {before} has no tombstone at or below "
                f"revision {new['revision']}"
            )
    return _set_once(old, new, SET_ONCE_MESSAGE_FIELDS)


def receipt_transition(old: Row, new: Row) -> str | None:
    for field in ("message_id", "agent"):
        if new[field] != old[field]:
            return f"{field} is immutable"
    return _set_once(old, new, SET_ONCE_RECEIPT_FIELDS)
