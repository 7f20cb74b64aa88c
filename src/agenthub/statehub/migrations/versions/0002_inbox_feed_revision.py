"""Change feed (contract §2): revision columns, tombstones, and the revision triggers.

Revision ID: 0002_inbox_feed_revision
Revises: 0001_inbox_tables
Create Date: 2026-11-30

The DDL below is a frozen copy of `agenthub.statehub.revisions` as of this
revision (a test asserts they are identical). Existing rows are backfilled with
one revision, so that one snapshot equals one revision.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from agenthub.sqltypes import UTCDateTime

revision: str = "0002_inbox_feed_revision"
down_revision: str | None = "0001_inbox_tables"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PG_DDL = (
    "CREATE SEQUENCE IF NOT EXISTS inbox_revision_seq AS bigint",
    "\nCREATE OR REPLACE FUNCTION inbox_feed_revision() RETURNS bigint\nLANGUAGE plpgsql AS $$\nDECLARE\n    tx text := pg_current_xact_id()::text;\n    cached text := current_setting('statehub.inbox_rev', true);\n    rev bigint;\nBEGIN\n    IF cached IS NOT NULL AND cached <> '' AND split_part(cached, ':', 1) = tx THEN\n        RETURN split_part(cached, ':', 2)::bigint;\n    END IF;\n    PERFORM pg_advisory_xact_lock(5348490098);\n    rev := nextval('inbox_revision_seq');\n    PERFORM set_config('statehub.inbox_rev', tx || ':' || rev::text, true);\n    -- Wakes long-polling feed readers on every State Hub worker at commit.\n    -- Once per transaction; commits are serialized by the lock anyway.\n    PERFORM pg_notify('statehub_inbox_feed', '');\n    RETURN rev;\nEND\n$$;\n",
    "\nCREATE OR REPLACE FUNCTION inbox_feed_stamp() RETURNS trigger\nLANGUAGE plpgsql AS $$\nBEGIN\n    -- A no-op update (a COALESCE upsert that changes nothing, a repeated read)\n    -- keeps its revision: only real changes reach the feed.\n    IF TG_OP = 'UPDATE' AND NEW IS NOT DISTINCT FROM OLD THEN\n        RETURN NEW;\n    END IF;\n    NEW.revision := inbox_feed_revision();\n    RETURN NEW;\nEND\n$$;\n",
    "\nCREATE OR REPLACE FUNCTION inbox_feed_tombstone() RETURNS trigger\nLANGUAGE plpgsql AS $$\nBEGIN\n    INSERT INTO message_tombstones (message_id, revision, deleted_at, reason)\n    VALUES (OLD.id, inbox_feed_revision(), now(),\n            NULLIF(current_setting('statehub.delete_reason', true), ''))\n    ON CONFLICT (message_id) DO NOTHING;\n    RETURN OLD;\nEND\n$$;\n",
    "\nCREATE OR REPLACE FUNCTION inbox_feed_receipt_tombstone() RETURNS trigger\nLANGUAGE plpgsql AS $$\nBEGIN\n    -- Receipts dropped by a message delete are covered by the message tombstone;\n    -- during that cascade the message row is already gone.\n    IF EXISTS (SELECT 1 FROM agent_messages WHERE id = OLD.message_id) THEN\n        INSERT INTO receipt_tombstones (message_id, agent, revision, deleted_at)\n        VALUES (OLD.message_id, OLD.agent, inbox_feed_revision(), now())\n        ON CONFLICT (message_id, agent)\n        DO UPDATE SET revision = EXCLUDED.revision, deleted_at = EXCLUDED.deleted_at;\n    END IF;\n    RETURN OLD;\nEND\n$$;\n",
    "\nCREATE TRIGGER agent_messages_revision BEFORE INSERT OR UPDATE ON agent_messages\n    FOR EACH ROW EXECUTE FUNCTION inbox_feed_stamp();\nCREATE TRIGGER message_receipts_revision BEFORE INSERT OR UPDATE ON message_receipts\n    FOR EACH ROW EXECUTE FUNCTION inbox_feed_stamp();\nCREATE TRIGGER agent_messages_tombstone BEFORE DELETE ON agent_messages\n    FOR EACH ROW EXECUTE FUNCTION inbox_feed_tombstone();\nCREATE TRIGGER message_receipts_tombstone BEFORE DELETE ON message_receipts\n    FOR EACH ROW EXECUTE FUNCTION inbox_feed_receipt_tombstone();\n",
)

PG_DROP = (
    "DROP TRIGGER IF EXISTS message_receipts_tombstone ON message_receipts",
    "DROP TRIGGER IF EXISTS agent_messages_tombstone ON agent_messages",
    "DROP TRIGGER IF EXISTS message_receipts_revision ON message_receipts",
    "DROP TRIGGER IF EXISTS agent_messages_revision ON agent_messages",
    "DROP FUNCTION IF EXISTS inbox_feed_receipt_tombstone()",
    "DROP FUNCTION IF EXISTS inbox_feed_tombstone()",
    "DROP FUNCTION IF EXISTS inbox_feed_stamp()",
    "DROP FUNCTION IF EXISTS inbox_feed_revision()",
    "DROP SEQUENCE IF EXISTS inbox_revision_seq",
)

SQLITE_DDL = (
    "\nCREATE TABLE IF NOT EXISTS inbox_revision_state (\n    id INTEGER PRIMARY KEY CHECK (id = 1),\n    last INTEGER NOT NULL,\n    open INTEGER NOT NULL DEFAULT 0,\n    delete_reason TEXT\n)",
    "INSERT OR IGNORE INTO inbox_revision_state (id, last, open) VALUES (1, 0, 0)",
    "\nCREATE TRIGGER agent_messages_revision_insert AFTER INSERT ON agent_messages\nBEGIN\n    UPDATE inbox_revision_state SET last = last + 1, open = 2 WHERE id = 1 AND open = 1;\n    UPDATE inbox_revision_state SET last = last + 1 WHERE id = 1 AND open = 0;\n    UPDATE agent_messages SET revision = (SELECT last FROM inbox_revision_state WHERE id = 1) WHERE id = NEW.id;\nEND",
    "\nCREATE TRIGGER agent_messages_revision_update\nAFTER UPDATE OF from_agent, to_agent, subject, body, thread_id, read_at, archived_at, kind, expires_at, supersedes_id, created_at ON agent_messages\nWHEN OLD.from_agent IS NOT NEW.from_agent OR OLD.to_agent IS NOT NEW.to_agent OR OLD.subject IS NOT NEW.subject OR OLD.body IS NOT NEW.body OR OLD.thread_id IS NOT NEW.thread_id OR OLD.read_at IS NOT NEW.read_at OR OLD.archived_at IS NOT NEW.archived_at OR OLD.kind IS NOT NEW.kind OR OLD.expires_at IS NOT NEW.expires_at OR OLD.supersedes_id IS NOT NEW.supersedes_id OR OLD.created_at IS NOT NEW.created_at\nBEGIN\n    UPDATE inbox_revision_state SET last = last + 1, open = 2 WHERE id = 1 AND open = 1;\n    UPDATE inbox_revision_state SET last = last + 1 WHERE id = 1 AND open = 0;\n    UPDATE agent_messages SET revision = (SELECT last FROM inbox_revision_state WHERE id = 1) WHERE id = NEW.id;\nEND",
    "\nCREATE TRIGGER message_receipts_revision_insert AFTER INSERT ON message_receipts\nBEGIN\n    UPDATE inbox_revision_state SET last = last + 1, open = 2 WHERE id = 1 AND open = 1;\n    UPDATE inbox_revision_state SET last = last + 1 WHERE id = 1 AND open = 0;\n    UPDATE message_receipts SET revision = (SELECT last FROM inbox_revision_state WHERE id = 1)\n    WHERE message_id = NEW.message_id AND agent = NEW.agent;\nEND",
    "\nCREATE TRIGGER message_receipts_revision_update\nAFTER UPDATE OF delivered_at, read_at, acknowledged_at ON message_receipts\nWHEN OLD.delivered_at IS NOT NEW.delivered_at OR OLD.read_at IS NOT NEW.read_at OR OLD.acknowledged_at IS NOT NEW.acknowledged_at\nBEGIN\n    UPDATE inbox_revision_state SET last = last + 1, open = 2 WHERE id = 1 AND open = 1;\n    UPDATE inbox_revision_state SET last = last + 1 WHERE id = 1 AND open = 0;\n    UPDATE message_receipts SET revision = (SELECT last FROM inbox_revision_state WHERE id = 1)\n    WHERE message_id = NEW.message_id AND agent = NEW.agent;\nEND",
    "\nCREATE TRIGGER agent_messages_tombstone BEFORE DELETE ON agent_messages\nBEGIN\n    UPDATE inbox_revision_state SET last = last + 1, open = 2 WHERE id = 1 AND open = 1;\n    UPDATE inbox_revision_state SET last = last + 1 WHERE id = 1 AND open = 0;\n    INSERT OR IGNORE INTO message_tombstones (message_id, revision, deleted_at, reason)\n    VALUES (OLD.id, (SELECT last FROM inbox_revision_state WHERE id = 1), strftime('%Y-%m-%d %H:%M:%f000', 'now'),\n            (SELECT delete_reason FROM inbox_revision_state WHERE id = 1));\n    DELETE FROM message_receipts WHERE message_id = OLD.id;\n    UPDATE agent_messages SET thread_id = NULL WHERE thread_id = OLD.id;\n    UPDATE agent_messages SET supersedes_id = NULL WHERE supersedes_id = OLD.id;\nEND",
    "\nCREATE TRIGGER message_receipts_tombstone BEFORE DELETE ON message_receipts\nWHEN EXISTS (SELECT 1 FROM agent_messages WHERE id = OLD.message_id)\n    AND NOT EXISTS (SELECT 1 FROM message_tombstones WHERE message_id = OLD.message_id)\nBEGIN\n    UPDATE inbox_revision_state SET last = last + 1, open = 2 WHERE id = 1 AND open = 1;\n    UPDATE inbox_revision_state SET last = last + 1 WHERE id = 1 AND open = 0;\n    INSERT INTO receipt_tombstones (message_id, agent, revision, deleted_at)\n    VALUES (OLD.message_id, OLD.agent, (SELECT last FROM inbox_revision_state WHERE id = 1), strftime('%Y-%m-%d %H:%M:%f000', 'now'))\n    ON CONFLICT (message_id, agent)\n    DO UPDATE SET revision = excluded.revision, deleted_at = excluded.deleted_at;\nEND",
)

SQLITE_DROP = (
    "DROP TRIGGER IF EXISTS message_receipts_tombstone",
    "DROP TRIGGER IF EXISTS agent_messages_tombstone",
    "DROP TRIGGER IF EXISTS message_receipts_revision_update",
    "DROP TRIGGER IF EXISTS message_receipts_revision_insert",
    "DROP TRIGGER IF EXISTS agent_messages_revision_update",
    "DROP TRIGGER IF EXISTS agent_messages_revision_insert",
    "DROP TABLE IF EXISTS inbox_revision_state",
)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        op.execute("CREATE SEQUENCE IF NOT EXISTS inbox_revision_seq AS bigint")
    for table in ("agent_messages", "message_receipts"):
        op.add_column(
            table,
            sa.Column("revision", sa.BigInteger(), nullable=False, server_default=sa.text("0")),
        )
    # One value for every existing row: the first snapshot is one revision.
    if dialect == "postgresql":
        backfill: int = (
            op.get_bind().execute(sa.text("SELECT nextval('inbox_revision_seq')")).scalar_one()
        )
    else:
        backfill = 1
    for table in ("agent_messages", "message_receipts"):
        op.execute(sa.text(f"UPDATE {table} SET revision = :r").bindparams(r=backfill))
    op.create_index("ix_agent_messages_revision", "agent_messages", ["revision"])
    op.create_index("ix_message_receipts_revision", "message_receipts", ["revision"])

    op.create_table(
        "message_tombstones",
        sa.Column("message_id", sa.Uuid(), nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.Column("deleted_at", UTCDateTime(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("message_id", name="pk_message_tombstones"),
    )
    op.create_index("ix_message_tombstones_revision", "message_tombstones", ["revision"])
    op.create_table(
        "receipt_tombstones",
        sa.Column("message_id", sa.Uuid(), nullable=False),
        sa.Column("agent", sa.String(64), nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.Column("deleted_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("message_id", "agent", name="pk_receipt_tombstones"),
    )
    op.create_index("ix_receipt_tombstones_revision", "receipt_tombstones", ["revision"])

    for statement in PG_DDL if dialect == "postgresql" else SQLITE_DDL:
        op.execute(statement)
    if dialect == "sqlite":
        op.execute(sa.text("UPDATE inbox_revision_state SET last = :r").bindparams(r=backfill))


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for statement in PG_DROP if dialect == "postgresql" else SQLITE_DROP:
        op.execute(statement)
    op.drop_index("ix_receipt_tombstones_revision", "receipt_tombstones")
    op.drop_table("receipt_tombstones")
    op.drop_index("ix_message_tombstones_revision", "message_tombstones")
    op.drop_table("message_tombstones")
    op.drop_index("ix_message_receipts_revision", "message_receipts")
    op.drop_index("ix_agent_messages_revision", "agent_messages")
    for table in ("message_receipts", "agent_messages"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("revision")
