"""The per-key rules of contract §6: what an incoming row does to the stored one.

Pure functions over canonical rows (see `canonical`), shared by the page
applier and the re-snapshot check. `decide` is the §6 table itself:

    no stored row      insert
    r < s              stale (ignore, log)
    r == s, same       unchanged
    r == s, different  refuse (a conflict)
    r > s              replace, if the transition is justified, else refuse

The transitions say what a higher revision may change: each returns `None`
when the change is justified, or a reason naming the field that is not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

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

Outcome = Literal["insert", "stale", "unchanged", "refuse", "replace"]


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    # Why a `refuse`; `conflict` when it is the same revision with other content.
    reason: str | None = None
    conflict: bool = False


SAME_REVISION_CONFLICT = "same revision, different content"


def decide(new: Row, stored: Row | None, transition: Callable[[], str | None]) -> Decision:
    """The §6 outcome of `new` against the `stored` row of the same key.

    `transition` is asked only when `new` has the higher revision; it returns why
    the change is not allowed, or None.
    """
    if stored is None:
        return Decision("insert")
    if new["revision"] < stored["revision"]:
        return Decision("stale")
    if new["revision"] == stored["revision"]:
        if new == stored:
            return Decision("unchanged")
        return Decision("refuse", SAME_REVISION_CONFLICT, conflict=True)
    reason = transition()
    if reason is not None:
        return Decision("refuse", reason)
    return Decision("replace")


def no_transition() -> str | None:
    """For rows whose every change at a higher revision is allowed by the caller."""
    return None


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
