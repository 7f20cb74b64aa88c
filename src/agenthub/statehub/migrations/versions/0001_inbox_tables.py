"""The inbox: messages, per-reader receipts, identity aliases, instance facts.

Revision ID: 0001_inbox_tables
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from agenthub.sqltypes import UTCDateTime

revision: str = "0001_inbox_tables"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "agent_messages",
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
        sa.ForeignKeyConstraint(
            ["thread_id"],
            ["agent_messages.id"],
            name="fk_agent_messages_thread_id_agent_messages",
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["supersedes_id"],
            ["agent_messages.id"],
            name="fk_agent_messages_supersedes_id_agent_messages",
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_agent_messages"),
    )
    op.create_index(
        "ix_agent_messages_to_agent_created_at", "agent_messages", ["to_agent", "created_at"]
    )
    op.create_index(
        "ix_agent_messages_from_agent_created_at", "agent_messages", ["from_agent", "created_at"]
    )
    op.create_index("ix_agent_messages_thread_id", "agent_messages", ["thread_id"])
    op.create_index("ix_agent_messages_supersedes_id", "agent_messages", ["supersedes_id"])

    op.create_table(
        "message_receipts",
        sa.Column("message_id", sa.Uuid(), nullable=False),
        sa.Column("agent", sa.String(64), nullable=False),
        sa.Column("delivered_at", UTCDateTime(), nullable=True),
        sa.Column("read_at", UTCDateTime(), nullable=True),
        sa.Column("acknowledged_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["agent_messages.id"],
            name="fk_message_receipts_message_id_agent_messages",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("message_id", "agent", name="pk_message_receipts"),
    )
    op.create_index("ix_message_receipts_agent", "message_receipts", ["agent"])

    op.create_table(
        "message_identity_aliases",
        sa.Column("alias", sa.String(64), nullable=False),
        sa.Column("canonical", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("alias", name="pk_message_identity_aliases"),
    )
    op.create_index(
        "ix_message_identity_aliases_canonical", "message_identity_aliases", ["canonical"]
    )

    op.create_table(
        "statehub_meta",
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_statehub_meta"),
    )


def downgrade() -> None:
    op.drop_table("statehub_meta")
    op.drop_index("ix_message_identity_aliases_canonical", "message_identity_aliases")
    op.drop_table("message_identity_aliases")
    op.drop_index("ix_message_receipts_agent", "message_receipts")
    op.drop_table("message_receipts")
    op.drop_index("ix_agent_messages_supersedes_id", "agent_messages")
    op.drop_index("ix_agent_messages_thread_id", "agent_messages")
    op.drop_index("ix_agent_messages_from_agent_created_at", "agent_messages")
    op.drop_index("ix_agent_messages_to_agent_created_at", "agent_messages")
    op.drop_table("agent_messages")
