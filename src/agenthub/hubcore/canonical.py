"""Canonical rows: the one normal form hashed, compared and stored by hub-core.

Timestamps become UTC ISO-8601 with microseconds and a `Z`; UUIDs become
lowercase hyphenated strings; revisions are non-negative integers. A hash is
sha256 over canonical JSON (sorted keys, compact separators) of the normalized
rows sorted by key, so the same content hashes the same whichever database or
transport it came through.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from functools import cache
from typing import Any

from agenthub.contracts import inbox_feed

# A message row is the contract's message state; MESSAGE_FIELDS is State Hub's
# `MessageRead` (the row without its revision).
MESSAGE_ROW_FIELDS = inbox_feed.MESSAGE_FIELDS
MESSAGE_FIELDS = tuple(f for f in MESSAGE_ROW_FIELDS if f != "revision")
RECEIPT_ROW_FIELDS = inbox_feed.RECEIPT_FIELDS
# On a tombstone hub-core keeps only (message_id, revision, deleted_at) (contract §4).
TOMBSTONE_ROW_FIELDS = tuple(f for f in inbox_feed.TOMBSTONE_FIELDS if f != "reason")
RECEIPT_TOMBSTONE_ROW_FIELDS = inbox_feed.RECEIPT_TOMBSTONE_FIELDS

AGENT_MAX = 64
KIND_MAX = 32

Row = dict[str, Any]


class MalformedRow(ValueError):
    """A row that cannot be put in canonical form; `field` says which value is wrong."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


# Already canonical text skips the parse: the feed follower normalizes every row it applies.
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_CANONICAL_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
# The forms SQLAlchemy stores on SQLite (32 hex digits; naive UTC with a space): a
# capture from a SQLite State Hub reads them on every row, and the generic parse of
# both was a third of that capture's CPU.
_STORED_UUID = re.compile(r"[0-9a-f]{32}")
_STORED_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}")


def canonical_uuid(value: Any, field: str = "id") -> str:
    if type(value) is str and _CANONICAL_UUID.fullmatch(value):  # the common case first
        return value
    if type(value) is str and _STORED_UUID.fullmatch(value):
        return f"{value[:8]}-{value[8:12]}-{value[12:16]}-{value[16:20]}-{value[20:]}"
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, str):
        try:
            return str(uuid.UUID(value))
        except ValueError:
            pass
    raise MalformedRow(field, f"expected a UUID, got {value!r:.60}")


def canonical_timestamp(value: Any, field: str) -> str:
    """UTC ISO-8601 with microseconds and `Z`. Naive values are UTC (SQLite stores them so)."""
    moment: datetime
    if type(value) is str and (_CANONICAL_TIME.fullmatch(value) or _STORED_TIME.fullmatch(value)):
        try:
            datetime.fromisoformat(value)  # still a real date and time
        except ValueError:
            raise MalformedRow(
                field, f"expected an ISO-8601 timestamp, got {value!r:.60}"
            ) from None
        return value if value[10] == "T" else f"{value[:10]}T{value[11:]}Z"  # naive: UTC
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise MalformedRow(
                field, f"expected an ISO-8601 timestamp, got {value!r:.60}"
            ) from None
    else:
        raise MalformedRow(field, f"expected an ISO-8601 timestamp, got {value!r:.60}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    # isoformat, not strftime: the same text at a third of the cost (a capture formats
    # every timestamp it reads), and four year digits even before the year 1000.
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def parse_timestamp(value: str) -> datetime:
    return datetime.fromisoformat(value).astimezone(UTC)


def _text(
    row: Mapping[str, Any], field: str, *, max_len: int | None = None, empty: bool = True
) -> str:
    value = row.get(field)
    if not isinstance(value, str):
        raise MalformedRow(field, f"expected a string, got {type(value).__name__}")
    if not empty and not value:
        raise MalformedRow(field, "must not be empty")
    if max_len is not None and len(value) > max_len:
        raise MalformedRow(field, f"longer than {max_len} characters")
    return value


def _optional(row: Mapping[str, Any], field: str, convert: Callable[[Any, str], str]) -> str | None:
    value = row.get(field)
    return None if value is None else convert(value, field)


def _revision(row: Mapping[str, Any], field: str = "revision") -> int:
    value = row.get(field)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MalformedRow(field, f"expected a non-negative integer, got {value!r:.30}")
    return value


@cache
def _field_set(fields: tuple[str, ...]) -> frozenset[str]:
    return frozenset(fields)


def _exact_fields(row: Any, fields: tuple[str, ...]) -> Mapping[str, Any]:
    # A dict with exactly these keys is one set comparison: the checks below, run
    # on every row, were a quarter of a snapshot follower's CPU.
    if isinstance(row, dict) and row.keys() == _field_set(fields):
        return row
    if not isinstance(row, Mapping):
        raise MalformedRow("row", f"expected an object, got {type(row).__name__}")
    missing = [f for f in fields if f not in row]
    if missing:
        raise MalformedRow(missing[0], "missing")
    extra = sorted(set(row) - set(fields))
    if extra:
        raise MalformedRow(extra[0], "unexpected field")
    return row


_MESSAGE_KEYS = frozenset(MESSAGE_ROW_FIELDS)


def normalize_message(row: Any) -> Row:
    """A bundle message row (State Hub's `MessageRead` fields plus `revision`) in canonical form."""
    if type(row) is dict and row.keys() == _MESSAGE_KEYS:
        # Plain text fields and revision checked at once, without a call per field: every
        # capture, import and snapshot normalizes every row, and the calls were a third of
        # it. Anything else takes the checked path, which names what is wrong.
        sender, to, kind, revision = (
            row["from_agent"],
            row["to_agent"],
            row["kind"],
            row["revision"],
        )
        if (
            type(sender) is str
            and type(to) is str
            and type(kind) is str
            and type(row["subject"]) is str
            and type(row["body"]) is str
            and type(revision) is int
            and revision >= 0
            and 0 < len(sender) <= AGENT_MAX
            and 0 < len(to) <= AGENT_MAX
            and 0 < len(kind) <= KIND_MAX
        ):
            thread, read, archived = row["thread_id"], row["read_at"], row["archived_at"]
            expires, supersedes = row["expires_at"], row["supersedes_id"]
            return {
                "id": canonical_uuid(row["id"], "id"),
                "from_agent": sender,
                "to_agent": to,
                "subject": row["subject"],
                "body": row["body"],
                "thread_id": None if thread is None else canonical_uuid(thread, "thread_id"),
                "read_at": None if read is None else canonical_timestamp(read, "read_at"),
                "archived_at": (
                    None if archived is None else canonical_timestamp(archived, "archived_at")
                ),
                "kind": kind,
                "expires_at": None
                if expires is None
                else canonical_timestamp(expires, "expires_at"),
                "supersedes_id": (
                    None if supersedes is None else canonical_uuid(supersedes, "supersedes_id")
                ),
                "created_at": canonical_timestamp(row["created_at"], "created_at"),
                "revision": revision,
            }
    return _checked_message(row)


def _checked_message(row: Any) -> Row:
    row = _exact_fields(row, MESSAGE_ROW_FIELDS)
    # The optional fields are tested here rather than through `_optional`: a snapshot
    # follower normalizes every row, and the calls were a fifth of it.
    thread, read, archived = row["thread_id"], row["read_at"], row["archived_at"]
    expires, supersedes = row["expires_at"], row["supersedes_id"]
    return {
        "id": canonical_uuid(row["id"], "id"),
        "from_agent": _text(row, "from_agent", max_len=AGENT_MAX, empty=False),
        "to_agent": _text(row, "to_agent", max_len=AGENT_MAX, empty=False),
        "subject": _text(row, "subject"),
        "body": _text(row, "body"),
        "thread_id": None if thread is None else canonical_uuid(thread, "thread_id"),
        "read_at": None if read is None else canonical_timestamp(read, "read_at"),
        "archived_at": None if archived is None else canonical_timestamp(archived, "archived_at"),
        "kind": _text(row, "kind", max_len=KIND_MAX, empty=False),
        "expires_at": None if expires is None else canonical_timestamp(expires, "expires_at"),
        "supersedes_id": (
            None if supersedes is None else canonical_uuid(supersedes, "supersedes_id")
        ),
        "created_at": canonical_timestamp(row["created_at"], "created_at"),
        "revision": _revision(row),
    }


def normalize_receipt(row: Any) -> Row:
    row = _exact_fields(row, RECEIPT_ROW_FIELDS)
    return {
        "message_id": canonical_uuid(row["message_id"], "message_id"),
        "agent": _text(row, "agent", max_len=AGENT_MAX, empty=False),
        "delivered_at": _optional(row, "delivered_at", canonical_timestamp),
        "read_at": _optional(row, "read_at", canonical_timestamp),
        "acknowledged_at": _optional(row, "acknowledged_at", canonical_timestamp),
        "revision": _revision(row),
    }


def normalize_tombstone(row: Any) -> Row:
    row = _exact_fields(row, TOMBSTONE_ROW_FIELDS)
    return {
        "message_id": canonical_uuid(row["message_id"], "message_id"),
        "revision": _revision(row),
        "deleted_at": canonical_timestamp(row["deleted_at"], "deleted_at"),
    }


def normalize_feed_tombstone(state: Any) -> Row:
    """A tombstone as the feed serves it, in the form hub-core keeps: State Hub's
    `reason` is dropped, and nothing of the deleted message stays."""
    if isinstance(state, Mapping):
        state = {k: v for k, v in state.items() if k != "reason"}
    return normalize_tombstone(state)


def normalize_receipt_tombstone(state: Any) -> Row:
    """A receipt tombstone (a feed `receipt` delete, or a snapshot `receipt_tombstones`
    row) in canonical form. It names the receipt it ends, so its key obeys the
    receipt's rules (a non-empty agent of at most 64 characters) and its
    revision is a non-negative integer. Fields added within v1 are ignored."""
    if not isinstance(state, Mapping):
        raise MalformedRow("row", f"expected an object, got {type(state).__name__}")
    missing = [f for f in RECEIPT_TOMBSTONE_ROW_FIELDS if f not in state]
    if missing:
        raise MalformedRow(missing[0], "missing")
    return {
        "message_id": canonical_uuid(state["message_id"], "message_id"),
        "agent": _text(state, "agent", max_len=AGENT_MAX, empty=False),
        "revision": _revision(state),
        "deleted_at": canonical_timestamp(state["deleted_at"], "deleted_at"),
    }


def receipt_key(row: Mapping[str, Any]) -> str:
    return f"{row['message_id']}:{row['agent']}"


def _digest(rows: Iterable[Row], key: Callable[[Row], str]) -> str:
    return hashlib.sha256(inbox_feed.canonical_bytes(sorted(rows, key=key))).hexdigest()


def snapshot_hash(messages: Iterable[Any]) -> str:
    """sha256 of the messages in canonical form, sorted by id. Raises `MalformedRow`."""
    return _digest((normalize_message(m) for m in messages), key=lambda r: str(r["id"]))


def receipts_hash(receipts: Iterable[Any]) -> str:
    return _digest((normalize_receipt(r) for r in receipts), key=receipt_key)


def tombstones_hash(tombstones: Iterable[Any]) -> str:
    return _digest((normalize_tombstone(t) for t in tombstones), key=lambda r: str(r["message_id"]))


def hash_normalized(rows: Iterable[Row], key: Callable[[Row], str]) -> str:
    """The same digest for rows already in canonical form (skips re-normalizing)."""
    return _digest(rows, key)
