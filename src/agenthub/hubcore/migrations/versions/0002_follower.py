"""Feed follower: no cross-row foreign keys, receipt tombstones, staging, cursor epoch/errors.

A follower applies rows in revision order, and rows keep only their latest
revision, so a reply (or a receipt) can legitimately arrive before its root's
newest revision: the two foreign keys go, and closure is checked at
checkpoints instead.

Revision ID: 0002_follower
Revises: 0001_projection_tables
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from agenthub.sqltypes import UTCDateTime

revision: str = "0002_follower"
down_revision: str | None = "0001_projection_tables"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("projected_messages") as batch:
        batch.drop_constraint(
            "fk_projected_messages_thread_id_projected_messages", type_="foreignkey"
        )
    with op.batch_alter_table("projected_receipts") as batch:
        batch.drop_constraint(
            "fk_projected_receipts_message_id_projected_messages", type_="foreignkey"
        )
    op.create_table(
        "projected_receipt_tombstones",
        sa.Column("message_id", sa.Uuid(), nullable=False),
        sa.Column("agent", sa.String(64), nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.Column("deleted_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("message_id", "agent", name="pk_projected_receipt_tombstones"),
    )
    op.create_table(
        "staged_snapshot_rows",
        sa.Column("snapshot_id", sa.String(64), nullable=False),
        sa.Column("part", sa.String(32), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("snapshot_id", "part", "key", name="pk_staged_snapshot_rows"),
    )
    with op.batch_alter_table("source_cursors") as batch:
        batch.add_column(sa.Column("source_epoch", sa.String(200), nullable=True))
        batch.add_column(sa.Column("last_error", sa.Text(), nullable=True))
        batch.add_column(sa.Column("last_error_at", UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("source_cursors") as batch:
        batch.drop_column("last_error_at")
        batch.drop_column("last_error")
        batch.drop_column("source_epoch")
    op.drop_table("staged_snapshot_rows")
    op.drop_table("projected_receipt_tombstones")
    with op.batch_alter_table("projected_receipts") as batch:
        batch.create_foreign_key(
            "fk_projected_receipts_message_id_projected_messages",
            "projected_messages",
            ["message_id"],
            ["id"],
        )
    with op.batch_alter_table("projected_messages") as batch:
        batch.create_foreign_key(
            "fk_projected_messages_thread_id_projected_messages",
            "projected_messages",
            ["thread_id"],
            ["id"],
        )
