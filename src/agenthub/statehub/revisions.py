"""The revision machinery: how every inbox write gets a feed revision.

PostgreSQL (contract §2, §8): a sequence, a per-transaction cache in the GUC
`statehub.inbox_rev`, and one of two revision sources —

* `lock` (default): `nextval` under `pg_advisory_xact_lock(5348490098)`, so
  commit order equals revision order and any visible maximum is a watermark.
  The lock is taken when the commit starts, not at the first write: the first
  write draws a revision unlocked, and a deferred constraint trigger checks it
  under the lock against the highest committed one, drawing again only when a
  later drawer committed first (migration 0004);
* `xid`: the writer's `pg_current_xact_id()` (plus a fixed offset that keeps
  revisions monotonic across a mode switch); the feed serves only below
  `pg_snapshot_xmin(pg_current_snapshot())`, so writers never serialize.

SQLite (embedded) has one writer at a time, so a counter row gives the same
guarantees: State Hub's own write transactions open the row (`open = 1`) and
close it before commit, and the first write in between draws the one revision
of that transaction. A write from any other program (the `sqlite3` shell) finds
the row closed and draws a fresh revision per row: more revisions than
transactions, never fewer, still in commit order.

Both engines turn every delete of a message into a tombstone under the same
revision, and a direct delete of a receipt (no route does it; an operator can)
into a receipt tombstone, so consumers never keep a stale receipt.

The DDL here is what the models attach to `create_all`; the migration keeps a
frozen copy and a test asserts the two are identical.
"""

from __future__ import annotations

from typing import Literal

from agenthub.contracts.inbox_feed import MESSAGE_FIELDS, RECEIPT_FIELDS

ADVISORY_LOCK_KEY = 5348490098
DRAW_STRIDE = 1024
WAKE_CHANNEL = "statehub_inbox_feed"
RevisionMode = Literal["lock", "xid"]

# A change to any field the feed serves bumps the row's revision: every field of
# the contract's row shape but the key and the revision itself.
DATA_COLUMNS_MESSAGES = tuple(f for f in MESSAGE_FIELDS if f not in ("id", "revision"))
DATA_COLUMNS_RECEIPTS = tuple(
    f for f in RECEIPT_FIELDS if f not in ("message_id", "agent", "revision")
)

# -- PostgreSQL ----------------------------------------------------------------

# Both `lock` revision functions: this transaction's cached revision, if drawn.
_PG_REVISION_FUNCTION_CACHED = """
CREATE OR REPLACE FUNCTION inbox_feed_revision() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    tx text := pg_current_xact_id()::text;
    cached text := current_setting('statehub.inbox_rev', true);
    rev bigint;
BEGIN
    IF cached IS NOT NULL AND cached <> '' AND split_part(cached, ':', 1) = tx THEN
        RETURN split_part(cached, ':', 2)::bigint;
    END IF;
"""

PG_REVISION_FUNCTION_LOCK = (
    _PG_REVISION_FUNCTION_CACHED
    + f"""    PERFORM pg_advisory_xact_lock({ADVISORY_LOCK_KEY});
    rev := nextval('inbox_revision_seq');
    PERFORM set_config('statehub.inbox_rev', tx || ':' || rev::text, true);
    -- Wakes long-polling feed readers on every State Hub worker at commit.
    -- Once per transaction; commits are serialized by the lock anyway.
    PERFORM pg_notify('{WAKE_CHANNEL}', '');
    RETURN rev;
END
$$;
"""
)


def pg_revision_function_xid(offset: int) -> str:
    """The `xid` source: no lock, no cache needed (one xid per transaction)."""
    return f"""
CREATE OR REPLACE FUNCTION inbox_feed_revision() RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    RETURN pg_current_xact_id()::text::bigint + {int(offset)};
END
$$;
"""


def pg_stamp_function_xid(offset: int) -> str:
    """`xid` mode computes the revision inline: no nested function call per row,
    which is most of the trigger's cost once the lock is gone."""
    return f"""
CREATE OR REPLACE FUNCTION inbox_feed_stamp() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NEW;
    END IF;
    NEW.revision := pg_current_xact_id()::text::bigint + {int(offset)};
    RETURN NEW;
END
$$;
"""


PG_STAMP_FUNCTION = """
CREATE OR REPLACE FUNCTION inbox_feed_stamp() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- A no-op update (a COALESCE upsert that changes nothing, a repeated read)
    -- keeps its revision: only real changes reach the feed.
    IF TG_OP = 'UPDATE' AND NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NEW;
    END IF;
    NEW.revision := inbox_feed_revision();
    RETURN NEW;
END
$$;
"""

PG_TOMBSTONE_FUNCTION = """
CREATE OR REPLACE FUNCTION inbox_feed_tombstone() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO message_tombstones (message_id, revision, deleted_at, reason)
    VALUES (OLD.id, inbox_feed_revision(), now(),
            NULLIF(current_setting('statehub.delete_reason', true), ''))
    ON CONFLICT (message_id) DO NOTHING;
    RETURN OLD;
END
$$;
"""

PG_RECEIPT_TOMBSTONE_FUNCTION = """
CREATE OR REPLACE FUNCTION inbox_feed_receipt_tombstone() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- Receipts dropped by a message delete are covered by the message tombstone;
    -- during that cascade the message row is already gone.
    IF EXISTS (SELECT 1 FROM agent_messages WHERE id = OLD.message_id) THEN
        INSERT INTO receipt_tombstones (message_id, agent, revision, deleted_at)
        VALUES (OLD.message_id, OLD.agent, inbox_feed_revision(), now())
        ON CONFLICT (message_id, agent)
        DO UPDATE SET revision = EXCLUDED.revision, deleted_at = EXCLUDED.deleted_at;
    END IF;
    RETURN OLD;
END
$$;
"""

PG_TRIGGERS = """
CREATE TRIGGER agent_messages_revision BEFORE INSERT OR UPDATE ON agent_messages
    FOR EACH ROW EXECUTE FUNCTION inbox_feed_stamp();
CREATE TRIGGER message_receipts_revision BEFORE INSERT OR UPDATE ON message_receipts
    FOR EACH ROW EXECUTE FUNCTION inbox_feed_stamp();
CREATE TRIGGER agent_messages_tombstone BEFORE DELETE ON agent_messages
    FOR EACH ROW EXECUTE FUNCTION inbox_feed_tombstone();
CREATE TRIGGER message_receipts_tombstone BEFORE DELETE ON message_receipts
    FOR EACH ROW EXECUTE FUNCTION inbox_feed_receipt_tombstone();
"""

PG_DDL = (
    "CREATE SEQUENCE IF NOT EXISTS inbox_revision_seq AS bigint",
    PG_REVISION_FUNCTION_LOCK,
    PG_STAMP_FUNCTION,
    PG_TOMBSTONE_FUNCTION,
    PG_RECEIPT_TOMBSTONE_FUNCTION,
    PG_TRIGGERS,
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

# -- PostgreSQL, `lock` checked at commit (migration 0004) ----------------------
#
# The first write draws `nextval * DRAW_STRIDE` without the lock. When the commit
# starts, a DEFERRABLE INITIALLY DEFERRED constraint trigger takes the lock and
# compares the drawn revision with the highest one committed so far
# (`inbox_revision_committed`, advanced only under the lock). Above it: the rows
# keep their revision. Not above it (a later drawer committed first): the
# transaction takes the committed mark plus one and moves its rows there. Either
# way commits under the lock carry rising revisions, and the lock is held only
# from the commit's start to its end.
#
# The stride keeps a late committer from pushing everyone behind it into a second
# draw: `mark + 1` is never a multiple of the stride, so it collides with no drawn
# revision and stays below the pending ones (only after STRIDE - 1 late commits in
# a row does it fall back to a fresh draw). Revisions are opaque to consumers
# (contract: the cursor is not for arithmetic), so the gaps are invisible.
#
# `setval` is not rolled back: a transaction that fails after advancing the mark
# leaves it too high, which only makes a later transaction re-draw.

PG_REVISION_FUNCTION_LOCK_AT_COMMIT = (
    _PG_REVISION_FUNCTION_CACHED
    + f"""    rev := nextval('inbox_revision_seq') * {DRAW_STRIDE};
    PERFORM set_config('statehub.inbox_rev', tx || ':' || rev::text, true);
    RETURN rev;
END
$$;
"""
)

PG_COMMIT_FUNCTION_LOCK = f"""
CREATE OR REPLACE FUNCTION inbox_feed_commit() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    tx text := pg_current_xact_id()::text;
    cached text := current_setting('statehub.inbox_rev', true);
    drawn bigint;
    mark bigint;
    rev bigint;
BEGIN
    IF current_setting('statehub.inbox_committed', true) = tx
        OR cached IS NULL OR cached = '' OR split_part(cached, ':', 1) <> tx THEN
        RETURN NULL;
    END IF;
    -- Held from here to the commit's end: commit order equals revision order.
    PERFORM pg_advisory_xact_lock({ADVISORY_LOCK_KEY});
    PERFORM set_config('statehub.inbox_committed', tx, true);
    drawn := split_part(cached, ':', 2)::bigint;
    rev := drawn;
    mark := (SELECT last_value FROM inbox_revision_committed);
    IF drawn <= mark THEN
        rev := mark + 1;
        IF rev % {DRAW_STRIDE} = 0 THEN
            rev := nextval('inbox_revision_seq') * {DRAW_STRIDE};
        END IF;
        PERFORM set_config('statehub.inbox_rev', tx || ':' || rev::text, true);
        PERFORM inbox_feed_move(drawn, rev);
    END IF;
    PERFORM setval('inbox_revision_committed', rev);
    -- Wakes long-polling feed readers on every State Hub worker at commit.
    PERFORM pg_notify('{WAKE_CHANNEL}', '');
    RETURN NULL;
END
$$;
"""


def pg_commit_function_xid(offset: int) -> str:
    """`xid` draws nothing early; a transaction that drew under `lock` and commits
    after a switch takes its own xid's revision, as every `xid` writer does."""
    return f"""
CREATE OR REPLACE FUNCTION inbox_feed_commit() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    tx text := pg_current_xact_id()::text;
    cached text := current_setting('statehub.inbox_rev', true);
    rev bigint := pg_current_xact_id()::text::bigint + {int(offset)};
BEGIN
    IF current_setting('statehub.inbox_committed', true) = tx
        OR cached IS NULL OR cached = '' OR split_part(cached, ':', 1) <> tx THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('statehub.inbox_committed', tx, true);
    PERFORM set_config('statehub.inbox_rev', tx || ':' || rev::text, true);
    PERFORM inbox_feed_move(split_part(cached, ':', 2)::bigint, rev);
    RETURN NULL;
END
$$;
"""


# Moves every row of one transaction from its drawn revision to its final one (the
# stamp trigger re-stamps from the updated cache, which already holds `rev`).
PG_MOVE_FUNCTION = """
CREATE OR REPLACE FUNCTION inbox_feed_move(drawn bigint, rev bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE agent_messages SET revision = rev WHERE revision = drawn;
    UPDATE message_receipts SET revision = rev WHERE revision = drawn;
    UPDATE message_tombstones SET revision = rev WHERE revision = drawn;
    UPDATE receipt_tombstones SET revision = rev WHERE revision = drawn;
END
$$;
"""

FEED_TABLES = ("agent_messages", "message_receipts", "message_tombstones", "receipt_tombstones")

# Queued only while this transaction holds a drawn revision (`xid` mode never
# caches one), so `xid` writers pay nothing at commit.
PG_COMMIT_TRIGGERS = "".join(
    f"""
CREATE CONSTRAINT TRIGGER {table}_commit_revision AFTER INSERT OR UPDATE ON {table}
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (current_setting('statehub.inbox_rev', true) <> '')
    EXECUTE FUNCTION inbox_feed_commit();"""
    for table in FEED_TABLES
)

PG_COMMIT_DDL = (
    "CREATE SEQUENCE IF NOT EXISTS inbox_revision_committed AS bigint MINVALUE 0 START 0",
    PG_REVISION_FUNCTION_LOCK_AT_COMMIT,
    PG_MOVE_FUNCTION,
    PG_COMMIT_FUNCTION_LOCK,
    PG_COMMIT_TRIGGERS,
)

PG_COMMIT_DROP = (
    *(
        f"DROP TRIGGER IF EXISTS {table}_commit_revision ON {table}"
        for table in reversed(FEED_TABLES)
    ),
    "DROP FUNCTION IF EXISTS inbox_feed_commit()",
    "DROP FUNCTION IF EXISTS inbox_feed_move(bigint, bigint)",
    "DROP SEQUENCE IF EXISTS inbox_revision_committed",
)

# -- SQLite --------------------------------------------------------------------

_SQLITE_DRAW = """
    UPDATE inbox_revision_state SET last = last + 1, open = 2 WHERE id = 1 AND open = 1;
    UPDATE inbox_revision_state SET last = last + 1 WHERE id = 1 AND open = 0;"""
_SQLITE_CURRENT = "(SELECT last FROM inbox_revision_state WHERE id = 1)"
# Same text layout as SQLAlchemy's SQLite DATETIME storage, so it sorts with it.
_SQLITE_NOW = "strftime('%Y-%m-%d %H:%M:%f000', 'now')"


def _changed(columns: tuple[str, ...]) -> str:
    return " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in columns)


SQLITE_DDL = (
    """
CREATE TABLE IF NOT EXISTS inbox_revision_state (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    last INTEGER NOT NULL,
    open INTEGER NOT NULL DEFAULT 0,
    delete_reason TEXT
)""",
    "INSERT OR IGNORE INTO inbox_revision_state (id, last, open) VALUES (1, 0, 0)",
    f"""
CREATE TRIGGER agent_messages_revision_insert AFTER INSERT ON agent_messages
BEGIN{_SQLITE_DRAW}
    UPDATE agent_messages SET revision = {_SQLITE_CURRENT} WHERE id = NEW.id;
END""",
    f"""
CREATE TRIGGER agent_messages_revision_update
AFTER UPDATE OF {", ".join(DATA_COLUMNS_MESSAGES)} ON agent_messages
WHEN {_changed(DATA_COLUMNS_MESSAGES)}
BEGIN{_SQLITE_DRAW}
    UPDATE agent_messages SET revision = {_SQLITE_CURRENT} WHERE id = NEW.id;
END""",
    f"""
CREATE TRIGGER message_receipts_revision_insert AFTER INSERT ON message_receipts
BEGIN{_SQLITE_DRAW}
    UPDATE message_receipts SET revision = {_SQLITE_CURRENT}
    WHERE message_id = NEW.message_id AND agent = NEW.agent;
END""",
    f"""
CREATE TRIGGER message_receipts_revision_update
AFTER UPDATE OF {", ".join(DATA_COLUMNS_RECEIPTS)} ON message_receipts
WHEN {_changed(DATA_COLUMNS_RECEIPTS)}
BEGIN{_SQLITE_DRAW}
    UPDATE message_receipts SET revision = {_SQLITE_CURRENT}
    WHERE message_id = NEW.message_id AND agent = NEW.agent;
END""",
    # The cascade is spelled out, not left to the foreign keys: a `sqlite3` shell
    # has `foreign_keys` off unless the operator remembers to turn it on.
    f"""
CREATE TRIGGER agent_messages_tombstone BEFORE DELETE ON agent_messages
BEGIN{_SQLITE_DRAW}
    INSERT OR IGNORE INTO message_tombstones (message_id, revision, deleted_at, reason)
    VALUES (OLD.id, {_SQLITE_CURRENT}, {_SQLITE_NOW},
            (SELECT delete_reason FROM inbox_revision_state WHERE id = 1));
    DELETE FROM message_receipts WHERE message_id = OLD.id;
    UPDATE agent_messages SET thread_id = NULL WHERE thread_id = OLD.id;
    UPDATE agent_messages SET supersedes_id = NULL WHERE supersedes_id = OLD.id;
END""",
    f"""
CREATE TRIGGER message_receipts_tombstone BEFORE DELETE ON message_receipts
WHEN EXISTS (SELECT 1 FROM agent_messages WHERE id = OLD.message_id)
    AND NOT EXISTS (SELECT 1 FROM message_tombstones WHERE message_id = OLD.message_id)
BEGIN{_SQLITE_DRAW}
    INSERT INTO receipt_tombstones (message_id, agent, revision, deleted_at)
    VALUES (OLD.message_id, OLD.agent, {_SQLITE_CURRENT}, {_SQLITE_NOW})
    ON CONFLICT (message_id, agent)
    DO UPDATE SET revision = excluded.revision, deleted_at = excluded.deleted_at;
END""",
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

# Run by State Hub's own write transactions on SQLite (see module docstring).
SQLITE_OPEN = "UPDATE inbox_revision_state SET open = 1 WHERE id = 1"
SQLITE_CLOSE = "UPDATE inbox_revision_state SET open = 0, delete_reason = NULL WHERE id = 1"


def ddl_for(dialect: str) -> tuple[str, ...]:
    if dialect == "postgresql":
        return PG_DDL + PG_COMMIT_DDL
    if dialect == "sqlite":
        return SQLITE_DDL
    raise ValueError(f"no revision machinery for {dialect}")


def drop_for(dialect: str) -> tuple[str, ...]:
    return PG_COMMIT_DROP + PG_DROP if dialect == "postgresql" else SQLITE_DROP
