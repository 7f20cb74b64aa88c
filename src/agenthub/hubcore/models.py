"""hub-core projection tables (ORM models). Schema changes go through Alembic only.

hub-core's copy of the State Hub inbox is derived: every row carries the
`source_revision` State Hub gave it, tombstones keep no body, and one cursor
row per source records how far the copy has come.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import BigInteger, Index, MetaData, String, Text, Uuid, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from agenthub.sqltypes import NAMING_CONVENTION, UTCDateTime

SLUG_LENGTH = 64


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class ProjectedMessage(Base):
    """One State Hub `agent_messages` row as last seen at `source_revision`."""

    __tablename__ = "projected_messages"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    from_agent: Mapped[str] = mapped_column(String(SLUG_LENGTH))
    to_agent: Mapped[str] = mapped_column(String(SLUG_LENGTH))
    subject: Mapped[str] = mapped_column(Text)
    body: Mapped[str] = mapped_column(Text)
    # No foreign key: a follower may see a reply before its root's newest
    # revision; closure is checked at checkpoints instead (see `apply`).
    thread_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, nullable=True)
    read_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    archived_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    kind: Mapped[str] = mapped_column(String(32))
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    supersedes_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    source_revision: Mapped[int] = mapped_column(BigInteger)

    __table_args__ = (
        # Newest-first inbox reads walk this index and stop at `limit` instead of sorting.
        Index("ix_projected_messages_to_agent_created_at", "to_agent", "created_at", "id"),
        Index("ix_projected_messages_from_agent_created_at", "from_agent", "created_at"),
        Index("ix_projected_messages_thread_id", "thread_id"),
        # The live closure check finds the rows naming a deleted message through these two.
        Index(
            "ix_projected_messages_supersedes_id",
            "supersedes_id",
            postgresql_where=text("supersedes_id IS NOT NULL"),
            sqlite_where=text("supersedes_id IS NOT NULL"),
        ),
    )


class ProjectedReceipt(Base):
    """A reader's receipt for a broadcast: how broadcast read state is kept per reader."""

    __tablename__ = "projected_receipts"

    message_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    agent: Mapped[str] = mapped_column(String(SLUG_LENGTH), primary_key=True)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    read_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    acknowledged_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    source_revision: Mapped[int] = mapped_column(BigInteger)

    __table_args__ = (Index("ix_projected_receipts_agent", "agent"),)


class ProjectedTombstone(Base):
    """A message State Hub deleted. Deliberately no body, subject or agents."""

    __tablename__ = "projected_tombstones"

    message_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    revision: Mapped[int] = mapped_column(BigInteger)
    deleted_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ProjectedReceiptTombstone(Base):
    """A receipt State Hub deleted directly, so a replayed older upsert cannot revive it."""

    __tablename__ = "projected_receipt_tombstones"

    message_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    agent: Mapped[str] = mapped_column(String(SLUG_LENGTH), primary_key=True)
    revision: Mapped[int] = mapped_column(BigInteger)
    deleted_at: Mapped[datetime] = mapped_column(UTCDateTime)


class StagedSnapshotRow(Base):
    """One row of a paged snapshot being fetched; swapped in whole once every page is here."""

    __tablename__ = "staged_snapshot_rows"

    snapshot_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    part: Mapped[str] = mapped_column(String(32), primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    revision: Mapped[int] = mapped_column(BigInteger)
    state: Mapped[str] = mapped_column(Text)


class SourceCursor(Base):
    """How far the copy of one State Hub instance has come (filled by import or the follower)."""

    __tablename__ = "source_cursors"

    source_instance: Mapped[str] = mapped_column(String(200), primary_key=True)
    cursor: Mapped[str] = mapped_column(String(64))
    high_water: Mapped[str] = mapped_column(String(64))
    last_source_time: Mapped[datetime] = mapped_column(UTCDateTime)
    last_success_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # How the rows got here: "snapshot-pilot" for an import, "live" once following.
    mode: Mapped[str] = mapped_column(String(32))
    content_hash: Mapped[str] = mapped_column(String(80))
    # Passed back as `source_epoch=` so a restored or failed-over source answers 409.
    source_epoch: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # The follower's last refusal or transport failure, for /healthz and operators.
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    last_error_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
