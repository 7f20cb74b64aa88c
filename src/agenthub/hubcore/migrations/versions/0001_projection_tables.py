"""hub-core projection: messages, receipts, tombstones and the per-source cursor.

Revision ID: 0001_projection_tables
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from agenthub.sqltypes import UTCDateTime

revision: str = "0001_projection_tables"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "projected_messages",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("from_agent", sa.String(64), nullable=False),
        sa.Column("to_agent", sa.String(64), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("thread_id", sa.Uuid(), nullable=True),
        sa.Column("read_at", UTCDateTime(), nullable=True),
        sa.Column("archived_at", UTCDateTime(), nullable=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=True),
        sa.Column("supersedes_id", sa.Uuid(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("source_revision", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["thread_id"],
            ["projected_messages.id"],
            name="fk_projected_messages_thread_id_projected_messages",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_projected_messages"),
    )
    op.create_index(
        "ix_projected_messages_to_agent_created_at",
        "projected_messages",
        ["to_agent", "created_at", "id"],
    )
    op.create_index(
        "ix_projected_messages_from_agent_created_at",
        "projected_messages",
        ["from_agent", "created_at"],
    )
    op.create_index("ix_projected_messages_thread_id", "projected_messages", ["thread_id"])

    op.create_table(
        "projected_receipts",
        sa.Column("message_id", sa.Uuid(), nullable=False),
        sa.Column("agent", sa.String(64), nullable=False),
        sa.Column("delivered_at", UTCDateTime(), nullable=True),
        sa.Column("read_at", UTCDateTime(), nullable=True),
        sa.Column("acknowledged_at", UTCDateTime(), nullable=True),
        sa.Column("source_revision", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["projected_messages.id"],
            name="fk_projected_receipts_message_id_projected_messages",
        ),
        sa.PrimaryKeyConstraint("message_id", "agent", name="pk_projected_receipts"),
    )
    op.create_index("ix_projected_receipts_agent", "projected_receipts", ["agent"])

    op.create_table(
        "projected_tombstones",
        sa.Column("message_id", sa.Uuid(), nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.Column("deleted_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("message_id", name="pk_projected_tombstones"),
    )

    op.create_table(
        "source_cursors",
        sa.Column("source_instance", sa.String(200), nullable=False),
        sa.Column("cursor", sa.String(64), nullable=False),
        sa.Column("high_water", sa.String(64), nullable=False),
        sa.Column("last_source_time", UTCDateTime(), nullable=False),
        sa.Column("last_success_at", UTCDateTime(), nullable=False),
        sa.Column("mode", sa.String(32), nullable=False),
        sa.Column("content_hash", sa.String(80), nullable=False),
        sa.PrimaryKeyConstraint("source_instance", name="pk_source_cursors"),
    )


def downgrade() -> None:
    op.drop_table("source_cursors")
    op.drop_table("projected_tombstones")
    op.drop_index("ix_projected_receipts_agent", "projected_receipts")
    op.drop_table("projected_receipts")
    op.drop_index("ix_projected_messages_thread_id", "projected_messages")
    op.drop_index("ix_projected_messages_from_agent_created_at", "projected_messages")
    op.drop_index("ix_projected_messages_to_agent_created_at", "projected_messages")
    op.drop_table("projected_messages")
