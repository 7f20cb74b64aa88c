"""The feed's rows as they go on the wire, shared by cursor pages and snapshots.

The columns each row shape is selected with (`wire_columns` has PostgreSQL
format ids and timestamps as text), the functions turning a selected row into
its contract state, and the snapshot's `content_hash`.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import String, Uuid, cast, func, type_coerce
from sqlalchemy.orm import Session

from agenthub.contracts.inbox_feed import (
    MESSAGE_FIELDS,
    RECEIPT_FIELDS,
    RECEIPT_TOMBSTONE_FIELDS,
    TOMBSTONE_FIELDS,
    ContentHasher,
)
from agenthub.sqltypes import UTCDateTime
from agenthub.statehub.models import (
    AgentMessage,
    MessageReceipt,
    MessageTombstone,
    ReceiptTombstone,
)

MESSAGES = AgentMessage.__table__.c
RECEIPTS = MessageReceipt.__table__.c
TOMBSTONES = MessageTombstone.__table__.c
RECEIPT_TOMBSTONES = ReceiptTombstone.__table__.c
# Each row shape's columns, in the contract's field order.
MESSAGE_COLUMNS = tuple(MESSAGES[name] for name in MESSAGE_FIELDS)
RECEIPT_COLUMNS = tuple(RECEIPTS[name] for name in RECEIPT_FIELDS)
TOMBSTONE_COLUMNS = tuple(TOMBSTONES[name] for name in TOMBSTONE_FIELDS)
RECEIPT_TOMBSTONE_COLUMNS = tuple(RECEIPT_TOMBSTONES[name] for name in RECEIPT_TOMBSTONE_FIELDS)
REVISION_TABLES = (MESSAGES, RECEIPTS, TOMBSTONES, RECEIPT_TOMBSTONES)
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
PG_ISO_FORMAT = 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'


def wire_columns(session: Session, columns: Sequence[Any]) -> tuple[Any, ...]:
    """`columns` as the feed selects them: ids and timestamps arrive as text that
    `uuid_text` and `iso` only slice (PostgreSQL formats them in SQL; SQLite
    hands back its stored text). Parsing every value into `UUID`/`datetime`
    objects only to print them again was most of a page's cost."""
    postgres = session.get_bind().dialect.name == "postgresql"
    out: list[Any] = []
    for column in columns:
        expr: Any
        if isinstance(column.type, Uuid):
            expr = cast(column, String) if postgres else type_coerce(column, String)
        elif isinstance(column.type, UTCDateTime):
            expr = (
                func.to_char(func.timezone("UTC", column), PG_ISO_FORMAT)
                if postgres
                else type_coerce(column, String)
            )
        else:
            out.append(column)
            continue
        out.append(expr.label(column.name))
    return tuple(out)


def iso(value: datetime | str | None) -> str | None:
    """Canonical timestamp text: UTC, microseconds, `Z`."""
    if value is None:
        return None
    if isinstance(value, str):
        if len(value) == 27 and value[10] == "T" and value[26] == "Z":
            return value  # already canonical (formatted by PostgreSQL)
        # SQLite's stored text, "YYYY-MM-DD HH:MM:SS.ffffff" (naive UTC) as written
        # by State Hub and its triggers; anything else takes the slow path.
        if len(value) == 26 and value[10] == " ":
            return f"{value[:10]}T{value[11:]}Z"
        parsed = datetime.fromisoformat(value)
        value = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    if value.utcoffset():
        value = value.astimezone(UTC)
    return value.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def _uuid(value: uuid.UUID | str | None) -> str | None:
    return None if value is None else uuid_text(value)


def uuid_text(value: uuid.UUID | str) -> str:
    """Lowercase hyphenated UUID from a `UUID` or SQLite's stored text."""
    if isinstance(value, str):
        if len(value) == 32:  # SQLite stores the 32 hex digits
            return f"{value[:8]}-{value[8:12]}-{value[12:16]}-{value[16:20]}-{value[20:]}"
        if _CANONICAL_UUID.fullmatch(value):  # PostgreSQL's uuid::text is canonical already
            return value
        return str(uuid.UUID(value))
    return str(value)


# Each takes a row selected with its shape's columns (`wire_columns`), in field
# order, and reads it by position: an SQLAlchemy `Row` or the driver's tuple.
def message_state(row: Sequence[Any]) -> dict[str, Any]:
    (id_, from_agent, to_agent, subject, body, thread_id, read_at, archived_at, kind,
     expires_at, supersedes_id, created_at, revision) = row  # fmt: skip
    return {
        "id": uuid_text(id_),
        "from_agent": from_agent,
        "to_agent": to_agent,
        "subject": subject,
        "body": body,
        "thread_id": _uuid(thread_id),
        "read_at": iso(read_at),
        "archived_at": iso(archived_at),
        "kind": kind,
        "expires_at": iso(expires_at),
        "supersedes_id": _uuid(supersedes_id),
        "created_at": iso(created_at),
        "revision": revision,
    }


def receipt_state(row: Sequence[Any]) -> dict[str, Any]:
    message_id, agent, delivered_at, read_at, acknowledged_at, revision = row
    return {
        "message_id": uuid_text(message_id),
        "agent": agent,
        "delivered_at": iso(delivered_at),
        "read_at": iso(read_at),
        "acknowledged_at": iso(acknowledged_at),
        "revision": revision,
    }


def tombstone_state(row: Sequence[Any]) -> dict[str, Any]:
    message_id, revision, deleted_at, reason = row
    return {
        "message_id": uuid_text(message_id),
        "revision": revision,
        "deleted_at": iso(deleted_at),
        "reason": reason,
    }


def receipt_tombstone_state(row: Sequence[Any]) -> dict[str, Any]:
    message_id, agent, revision, deleted_at = row
    return {
        "message_id": uuid_text(message_id),
        "agent": agent,
        "revision": revision,
        "deleted_at": iso(deleted_at),
    }


def content_hash(
    messages: Sequence[dict[str, Any]],
    receipts: Sequence[dict[str, Any]],
    tombstones: Sequence[dict[str, Any]],
) -> str:
    """sha256 of canonical JSON of `{messages, receipts, tombstones}`, rows sorted by key (§8)."""
    hasher = ContentHasher()
    for part, rows, key in (
        ("messages", messages, lambda r: r["id"]),
        ("receipts", receipts, lambda r: (r["message_id"], r["agent"])),
        ("tombstones", tombstones, lambda r: r["message_id"]),
    ):
        for row in sorted(rows, key=key):
            hasher.add(part, row)
    return hasher.finish()
