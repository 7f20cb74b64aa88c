"""Index the messages that supersede another, for the live closure check.

A live page that deletes a message must find the rows still naming it. Replies
have `ix_projected_messages_thread_id`; supersessions had nothing, so that
lookup read the whole table on every such page. Most messages supersede
nothing, so the index holds only those that do.

Revision ID: 0003_supersedes_index
Revises: 0002_follower
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_supersedes_index"
down_revision: str | None = "0002_follower"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NOT_NULL = sa.text("supersedes_id IS NOT NULL")


def upgrade() -> None:
    op.create_index(
        "ix_projected_messages_supersedes_id",
        "projected_messages",
        ["supersedes_id"],
        postgresql_where=NOT_NULL,
        sqlite_where=NOT_NULL,
    )


def downgrade() -> None:
    op.drop_index("ix_projected_messages_supersedes_id", table_name="projected_messages")
