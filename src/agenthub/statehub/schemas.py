"""Wire shapes of the inbox API (pydantic). Separate from the ORM models on purpose."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from agenthub.statehub.slugs import SLUG_HINT, SLUG_PATTERN, is_recipient, is_slug

RECIPIENT_PATTERN = r"^(?:\*|" + SLUG_PATTERN.removeprefix("^").removesuffix("$") + r")$"
# The slug rule as a schema fact for generated clients; the validators enforce it.
SLUG_SCHEMA = {"pattern": SLUG_PATTERN, "minLength": 1, "maxLength": 64}
RECIPIENT_SCHEMA = {"pattern": RECIPIENT_PATTERN, "minLength": 1, "maxLength": 64}
MAX_SUBJECT = 500
MAX_BODY = 256 * 1024
KIND_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,31}$"


def _slug(value: str) -> str:
    if not is_slug(value):
        raise ValueError(f"invalid agent slug {value!r}: {SLUG_HINT}")
    return value


def _recipient(value: str) -> str:
    if not is_recipient(value):
        raise ValueError(f"invalid recipient {value!r}: {SLUG_HINT}, or '*' to broadcast")
    return value


def _utc(value: datetime | None) -> datetime | None:
    # A naive timestamp from a client is read as UTC rather than rejected.
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("timestamp is outside years 1-9999 once converted to UTC") from None


def _no_nul(value: str) -> str:
    # PostgreSQL text cannot store NUL; refuse it on every database alike.
    if "\x00" in value:
        raise ValueError("text must not contain NUL (\\u0000) characters")
    return value


AgentSlug = Annotated[str, AfterValidator(_slug), Field(json_schema_extra=SLUG_SCHEMA)]
Recipient = Annotated[str, AfterValidator(_recipient), Field(json_schema_extra=RECIPIENT_SCHEMA)]
UTCTimestamp = Annotated[datetime | None, AfterValidator(_utc)]
PlainText = Annotated[str, AfterValidator(_no_nul)]


class MessageCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    from_agent: AgentSlug
    to_agent: Recipient
    subject: PlainText = Field(max_length=MAX_SUBJECT)
    body: PlainText = Field(max_length=MAX_BODY)
    kind: str = Field(default="message", pattern=KIND_PATTERN)
    thread_id: uuid.UUID | None = None
    expires_at: UTCTimestamp = None
    supersedes_id: uuid.UUID | None = None


class ReplyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    from_agent: AgentSlug
    body: PlainText = Field(max_length=MAX_BODY)
    subject: PlainText | None = Field(default=None, max_length=MAX_SUBJECT)


class MessageRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    from_agent: str
    to_agent: str
    subject: str
    body: str
    thread_id: uuid.UUID | None
    read_at: datetime | None
    archived_at: datetime | None
    kind: str
    expires_at: datetime | None
    supersedes_id: uuid.UUID | None
    created_at: datetime


class ReceiptRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    message_id: uuid.UUID
    agent: str
    delivered_at: datetime | None
    read_at: datetime | None
    acknowledged_at: datetime | None


class Health(BaseModel):
    status: str
    instance_label: str
    database: str
    high_water: str | None = None


class Problem(BaseModel):
    """Every State Hub error body. A request-shape 422 carries FastAPI's list of
    problems in `detail`; feed errors add where the source stands."""

    model_config = ConfigDict(extra="allow")

    detail: str | list[dict[str, Any]]
    code: str
    hint: str | None = None
    resnapshot_required: bool | None = None
