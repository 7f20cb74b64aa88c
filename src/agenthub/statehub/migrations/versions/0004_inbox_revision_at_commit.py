"""`lock` mode takes its lock at commit: a deferred constraint trigger per feed table.

Revision ID: 0004_inbox_revision_at_commit
Revises: 0003_idempotency_keys
Create Date: 2026-12-01

The first write draws a revision without the advisory lock; a DEFERRABLE
INITIALLY DEFERRED constraint trigger takes the lock when the commit starts and
keeps the revision if it is above every committed one, or draws again and moves
the transaction's rows. The lock is no longer held from the first write.
PostgreSQL only: SQLite has one writer.

The DDL below is a frozen copy of `agenthub.statehub.revisions.PG_COMMIT_DDL` as
of this revision (a test asserts they are identical). A database in `xid` mode
keeps its revision function; State Hub installs that mode's commit function at
startup (`source.prepare`).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_inbox_revision_at_commit"
down_revision: str | None = "0003_idempotency_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PG_COMMIT_DDL = (
    "CREATE SEQUENCE IF NOT EXISTS inbox_revision_committed AS bigint MINVALUE 0 START 0",
    "\nCREATE OR REPLACE FUNCTION inbox_feed_revision() RETURNS bigint\nLANGUAGE plpgsql AS $$\nDECLARE\n    tx text := pg_current_xact_id()::text;\n    cached text := current_setting('statehub.inbox_rev', true);\n    rev bigint;\nBEGIN\n    IF cached IS NOT NULL AND cached <> '' AND split_part(cached, ':', 1) = tx THEN\n        RETURN split_part(cached, ':', 2)::bigint;\n    END IF;\n    rev := nextval('inbox_revision_seq') * 1024;\n    PERFORM set_config('statehub.inbox_rev', tx || ':' || rev::text, true);\n    RETURN rev;\nEND\n$$;\n",
    "\nCREATE OR REPLACE FUNCTION inbox_feed_move(drawn bigint, rev bigint) RETURNS void\nLANGUAGE plpgsql AS $$\nBEGIN\n    UPDATE agent_messages SET revision = rev WHERE revision = drawn;\n    UPDATE message_receipts SET revision = rev WHERE revision = drawn;\n    UPDATE message_tombstones SET revision = rev WHERE revision = drawn;\n    UPDATE receipt_tombstones SET revision = rev WHERE revision = drawn;\nEND\n$$;\n",
    "\nCREATE OR REPLACE FUNCTION inbox_feed_commit() RETURNS trigger\nLANGUAGE plpgsql AS $$\nDECLARE\n    tx text := pg_current_xact_id()::text;\n    cached text := current_setting('statehub.inbox_rev', true);\n    drawn bigint;\n    mark bigint;\n    rev bigint;\nBEGIN\n    IF current_setting('statehub.inbox_committed', true) = tx\n        OR cached IS NULL OR cached = '' OR split_part(cached, ':', 1) <> tx THEN\n        RETURN NULL;\n    END IF;\n    -- Held from here to the commit's end: commit order equals revision order.\n    PERFORM pg_advisory_xact_lock(5348490098);\n    PERFORM set_config('statehub.inbox_committed', tx, true);\n    drawn := split_part(cached, ':', 2)::bigint;\n    rev := drawn;\n    mark := (SELECT last_value FROM inbox_revision_committed);\n    IF drawn <= mark THEN\n        rev := mark + 1;\n        IF rev % 1024 = 0 THEN\n            rev := nextval('inbox_revision_seq') * 1024;\n        END IF;\n        PERFORM set_config('statehub.inbox_rev', tx || ':' || rev::text, true);\n        PERFORM inbox_feed_move(drawn, rev);\n    END IF;\n    PERFORM setval('inbox_revision_committed', rev);\n    -- Wakes long-polling feed readers on every State Hub worker at commit.\n    PERFORM pg_notify('statehub_inbox_feed', '');\n    RETURN NULL;\nEND\n$$;\n",
    "\nCREATE CONSTRAINT TRIGGER agent_messages_commit_revision AFTER INSERT OR UPDATE ON agent_messages\n    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW\n    WHEN (current_setting('statehub.inbox_rev', true) <> '')\n    EXECUTE FUNCTION inbox_feed_commit();\nCREATE CONSTRAINT TRIGGER message_receipts_commit_revision AFTER INSERT OR UPDATE ON message_receipts\n    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW\n    WHEN (current_setting('statehub.inbox_rev', true) <> '')\n    EXECUTE FUNCTION inbox_feed_commit();\nCREATE CONSTRAINT TRIGGER message_tombstones_commit_revision AFTER INSERT OR UPDATE ON message_tombstones\n    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW\n    WHEN (current_setting('statehub.inbox_rev', true) <> '')\n    EXECUTE FUNCTION inbox_feed_commit();\nCREATE CONSTRAINT TRIGGER receipt_tombstones_commit_revision AFTER INSERT OR UPDATE ON receipt_tombstones\n    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW\n    WHEN (current_setting('statehub.inbox_rev', true) <> '')\n    EXECUTE FUNCTION inbox_feed_commit();",
)

PG_COMMIT_DROP = (
    "DROP TRIGGER IF EXISTS receipt_tombstones_commit_revision ON receipt_tombstones",
    "DROP TRIGGER IF EXISTS message_tombstones_commit_revision ON message_tombstones",
    "DROP TRIGGER IF EXISTS message_receipts_commit_revision ON message_receipts",
    "DROP TRIGGER IF EXISTS agent_messages_commit_revision ON agent_messages",
    "DROP FUNCTION IF EXISTS inbox_feed_commit()",
    "DROP FUNCTION IF EXISTS inbox_feed_move(bigint, bigint)",
    "DROP SEQUENCE IF EXISTS inbox_revision_committed",
)

# 0002's `lock` revision function (drawn at the first write), restored on downgrade.
PG_REVISION_FUNCTION_LOCK_AT_FIRST_WRITE = "\nCREATE OR REPLACE FUNCTION inbox_feed_revision() RETURNS bigint\nLANGUAGE plpgsql AS $$\nDECLARE\n    tx text := pg_current_xact_id()::text;\n    cached text := current_setting('statehub.inbox_rev', true);\n    rev bigint;\nBEGIN\n    IF cached IS NOT NULL AND cached <> '' AND split_part(cached, ':', 1) = tx THEN\n        RETURN split_part(cached, ':', 2)::bigint;\n    END IF;\n    PERFORM pg_advisory_xact_lock(5348490098);\n    rev := nextval('inbox_revision_seq');\n    PERFORM set_config('statehub.inbox_rev', tx || ':' || rev::text, true);\n    -- Wakes long-polling feed readers on every State Hub worker at commit.\n    -- Once per transaction; commits are serialized by the lock anyway.\n    PERFORM pg_notify('statehub_inbox_feed', '');\n    RETURN rev;\nEND\n$$;\n"


def _mode() -> str:
    value = op.get_bind().scalar(
        sa.text("SELECT value FROM statehub_meta WHERE key = 'revision_mode'")
    )
    return "xid" if value == "xid" else "lock"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    sequence, revision_function, *rest = PG_COMMIT_DDL
    op.execute(sequence)
    if _mode() == "lock":
        op.execute(revision_function)
    for statement in rest:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in PG_COMMIT_DROP:
        op.execute(statement)
    if _mode() == "lock":
        op.execute(PG_REVISION_FUNCTION_LOCK_AT_FIRST_WRITE)
