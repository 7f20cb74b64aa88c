"""State Hub tables (ORM models). Schema changes go through Alembic only."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    DDL,
    BigInteger,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    Uuid,
    event,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from agenthub.sqltypes import NAMING_CONVENTION, UTCDateTime
from agenthub.statehub import revisions

SLUG_LENGTH = 64


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class AgentMessage(Base):
    __tablename__ = "agent_messages"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    from_agent: Mapped[str] = mapped_column(String(SLUG_LENGTH))
    to_agent: Mapped[str] = mapped_column(String(SLUG_LENGTH))
    subject: Mapped[str] = mapped_column(Text)
    body: Mapped[str] = mapped_column(Text)
    thread_id: Mapped[uuid.UUID | None] = mapped_column(
        Uuid, ForeignKey("agent_messages.id", ondelete="SET NULL"), nullable=True
    )
    read_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    archived_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    kind: Mapped[str] = mapped_column(String(32), default="message")
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    supersedes_id: Mapped[uuid.UUID | None] = mapped_column(
        Uuid, ForeignKey("agent_messages.id", ondelete="SET NULL"), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # Set by the database (revision triggers), never by the application.
    revision: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))

    __table_args__ = (
        Index("ix_agent_messages_revision", "revision"),
        Index("ix_agent_messages_to_agent_created_at", "to_agent", "created_at"),
        Index("ix_agent_messages_from_agent_created_at", "from_agent", "created_at"),
        Index("ix_agent_messages_thread_id", "thread_id"),
        Index("ix_agent_messages_supersedes_id", "supersedes_id"),
    )


class MessageReceipt(Base):
    """Per-reader state of a broadcast. Every field is first-write-wins."""

    __tablename__ = "message_receipts"

    message_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("agent_messages.id", ondelete="CASCADE"), primary_key=True
    )
    agent: Mapped[str] = mapped_column(String(SLUG_LENGTH), primary_key=True)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    read_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    acknowledged_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    revision: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))

    __table_args__ = (
        Index("ix_message_receipts_agent", "agent"),
        Index("ix_message_receipts_revision", "revision"),
    )


class MessageTombstone(Base):
    """What is left of a deleted message: never its body."""

    __tablename__ = "message_tombstones"

    message_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    revision: Mapped[int] = mapped_column(BigInteger, index=True)
    deleted_at: Mapped[datetime] = mapped_column(UTCDateTime)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)


class ReceiptTombstone(Base):
    """A receipt deleted directly (not by its message's delete), so consumers drop it too."""

    __tablename__ = "receipt_tombstones"

    message_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    agent: Mapped[str] = mapped_column(String(SLUG_LENGTH), primary_key=True)
    revision: Mapped[int] = mapped_column(BigInteger, index=True)
    deleted_at: Mapped[datetime] = mapped_column(UTCDateTime)


class MessageIdentityAlias(Base):
    """`alias` → `canonical` agent slug. Operators insert these; reads canonicalise."""

    __tablename__ = "message_identity_aliases"

    alias: Mapped[str] = mapped_column(String(SLUG_LENGTH), primary_key=True)
    canonical: Mapped[str] = mapped_column(String(SLUG_LENGTH), index=True)


class StateHubMeta(Base):
    """Small key/value facts about this database, such as its generated instance label."""

    __tablename__ = "statehub_meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class IdempotencyRecord(Base):
    """A POST's `Idempotency-Key`: claimed in the transaction of the write it guards,
    then holding the first answer, which a repeat within 24 h gets back."""

    __tablename__ = "idempotency_keys"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    status_code: Mapped[int | None] = mapped_column(Integer)
    content_type: Mapped[str | None] = mapped_column(String(255))
    response_body: Mapped[bytes | None] = mapped_column(LargeBinary)

    __table_args__ = (Index("ix_idempotency_keys_created_at", "created_at"),)


def _attach_revision_ddl() -> None:
    """`create_all` gets the same triggers as the migration (a test compares them)."""
    for dialect in ("postgresql", "sqlite"):
        for statement in revisions.ddl_for(dialect):
            event.listen(
                Base.metadata,
                "after_create",
                # DDL() %-formats its text; the statement must reach the database verbatim.
                DDL(statement.replace("%", "%%")).execute_if(  # type: ignore[no-untyped-call]
                    dialect=dialect
                ),
            )


_attach_revision_ddl()
