"""`lock` mode takes its lock at commit (migration 0004), not at the first write."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import psycopg
import pytest
from sqlalchemy import Engine, text

from agenthub.db import make_engine
from agenthub.statehub import migrate, revisions
from tests.support.databases import temporary_pg_database
from tests.support.migrations import load_migration

MIGRATION = Path(migrate.MIGRATIONS_DIR) / "versions" / "0004_inbox_revision_at_commit.py"
INSERT = (
    "INSERT INTO agent_messages (id, from_agent, to_agent, subject, body, kind, created_at)"
    " VALUES (%s, 'a', 'b', 's', 'x', 'message', now())"
)


def _migration_module() -> ModuleType:
    return load_migration(MIGRATION)


def test_migration_keeps_a_frozen_copy_identical_to_the_models_ddl() -> None:
    frozen = _migration_module()
    assert frozen.PG_COMMIT_DDL == revisions.PG_COMMIT_DDL
    assert frozen.PG_COMMIT_DROP == revisions.PG_COMMIT_DROP
    assert frozen.PG_REVISION_FUNCTION_LOCK_AT_FIRST_WRITE == revisions.PG_REVISION_FUNCTION_LOCK


@pytest.fixture
def pg_url(pg_server_url: str) -> Iterator[str]:
    with temporary_pg_database(pg_server_url, prefix="agenthub_atcommit") as url:
        engine = make_engine(url)
        migrate.upgrade(engine)
        engine.dispose()
        yield url


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def _revisions(engine: Engine, ids: list[uuid.UUID]) -> list[int]:
    with engine.connect() as conn:
        return [
            int(
                conn.execute(
                    text("SELECT revision FROM agent_messages WHERE id = :i"), {"i": i}
                ).scalar_one()
            )
            for i in ids
        ]


def _race(url: str) -> tuple[uuid.UUID, uuid.UUID]:
    """A writes and stays open; B writes and commits under a 1 s lock timeout; then A
    commits. Returns (A's id, B's id)."""
    a_id, b_id = uuid.uuid4(), uuid.uuid4()
    with psycopg.connect(_libpq(url)) as a, psycopg.connect(_libpq(url)) as b:
        a.execute(INSERT, (a_id,))
        b.execute("SET lock_timeout = '1s'")
        b.execute(INSERT, (b_id,))
        b.commit()
        a.commit()
    return a_id, b_id


def test_an_open_writer_does_not_hold_the_lock_and_commit_order_is_revision_order(
    pg_url: str,
) -> None:
    """A drew first but B committed first: A draws again at commit and lands above B."""
    a_id, b_id = _race(pg_url)
    c_id = uuid.uuid4()
    with psycopg.connect(_libpq(pg_url)) as c:  # no race: keeps the revision it drew
        c.execute(INSERT, (c_id,))
        drawn = c.execute("SELECT revision FROM agent_messages WHERE id = %s", (c_id,)).fetchone()
        c.commit()

    engine = make_engine(pg_url)
    a_rev, b_rev, c_rev = _revisions(engine, [a_id, b_id, c_id])
    engine.dispose()
    assert 0 < b_rev < a_rev < c_rev
    assert drawn is not None and drawn[0] == c_rev


def test_broken_variant_drawing_at_the_first_write_blocks_the_second_writer(
    pg_url: str,
) -> None:
    engine = make_engine(pg_url)
    with engine.begin() as conn:
        for statement in revisions.PG_COMMIT_DROP:
            conn.execute(text(statement))
        conn.execute(text(revisions.PG_REVISION_FUNCTION_LOCK))
    engine.dispose()

    with pytest.raises(psycopg.errors.LockNotAvailable):
        _race(pg_url)


def test_one_transaction_over_several_tables_gets_one_revision(pg_url: str) -> None:
    ids = [uuid.uuid4(), uuid.uuid4()]
    with psycopg.connect(_libpq(pg_url)) as conn:
        for message_id in ids:
            conn.execute(INSERT, (message_id,))
        conn.execute(
            "INSERT INTO message_receipts (message_id, agent, delivered_at) VALUES (%s, 'r', now())",
            (ids[0],),
        )
        conn.execute("UPDATE agent_messages SET read_at = now() WHERE id = %s", (ids[0],))
        conn.execute("DELETE FROM message_receipts WHERE message_id = %s", (ids[0],))
        conn.commit()
        conn.execute("DELETE FROM agent_messages WHERE id = %s", (ids[1],))
        conn.commit()
        first = {
            int(r[0])
            for r in conn.execute(
                "SELECT revision FROM agent_messages UNION ALL SELECT revision FROM receipt_tombstones"
            )
        }
        tombstone = conn.execute("SELECT revision FROM message_tombstones").fetchall()

    assert len(first) == 1 and first.pop() > 0
    assert len(tombstone) == 1 and int(tombstone[0][0]) > 0
