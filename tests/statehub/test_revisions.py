"""The revision machinery itself: DDL parity, migrations, modes and epochs."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest
from sqlalchemy import Engine, insert, inspect, text

from agenthub.clock import FrozenClock
from agenthub.db import make_engine
from agenthub.statehub import migrate, revisions, source
from agenthub.statehub.feed import FeedService
from agenthub.statehub.inbox import InboxService
from agenthub.statehub.models import AgentMessage, Base
from agenthub.statehub.schemas import MessageCreate
from agenthub.statehub.store import Database
from tests.statehub.xid import once_served
from tests.support.databases import temporary_pg_database
from tests.support.migrations import load_migration

MIGRATION = Path(migrate.MIGRATIONS_DIR) / "versions" / "0002_inbox_feed_revision.py"


def _migration_module() -> ModuleType:
    return load_migration(MIGRATION)


def test_migration_keeps_a_frozen_copy_identical_to_the_models_ddl() -> None:
    frozen = _migration_module()
    assert frozen.PG_DDL == revisions.PG_DDL
    assert frozen.PG_DROP == revisions.PG_DROP
    assert frozen.SQLITE_DDL == revisions.SQLITE_DDL
    assert frozen.SQLITE_DROP == revisions.SQLITE_DROP


@pytest.fixture(params=["sqlite", "pg"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    server: str = request.getfixturevalue("pg_server_url")
    with temporary_pg_database(server, prefix="agenthub_rev") as url:
        yield url


def _send(db: Database, **fields: str) -> AgentMessage:
    inbox = InboxService(db, FrozenClock())
    data = {"from_agent": "a", "to_agent": "*", "subject": "s", "body": "b", **fields}
    return inbox.send(MessageCreate.model_validate(data))


def _revision(engine: Engine, message_id: uuid.UUID) -> int:
    with engine.connect() as conn:
        value: int = conn.execute(
            text("SELECT revision FROM agent_messages WHERE id = :i"),
            {"i": message_id if engine.dialect.name == "postgresql" else message_id.hex},
        ).scalar_one()
    return int(value)


def test_create_all_attaches_the_same_working_triggers(empty_url: str) -> None:
    engine = make_engine(empty_url)
    Base.metadata.create_all(engine)
    db = Database(engine)

    first = _send(db)
    second = _send(db)

    assert 0 < _revision(engine, first.id) < _revision(engine, second.id)
    engine.dispose()


def test_feed_migration_backfills_one_revision_and_downgrades_cleanly(empty_url: str) -> None:
    engine = make_engine(empty_url)
    migrate.upgrade(engine, "0001_inbox_tables")
    with engine.begin() as conn:
        for n in range(3):
            mid = uuid.uuid4()
            conn.execute(
                text(
                    "INSERT INTO agent_messages (id, from_agent, to_agent, subject, body, kind,"
                    " created_at) VALUES (:i, 'a', 'b', :s, 'x', 'message', :c)"
                ),
                {
                    "i": mid if engine.dialect.name == "postgresql" else mid.hex,
                    "s": f"m{n}",
                    "c": "2026-01-01 00:00:00",
                },
            )

    migrate.upgrade(engine)
    with engine.connect() as conn:
        backfilled = {r[0] for r in conn.execute(text("SELECT revision FROM agent_messages"))}
    after = _send(Database(engine))

    assert len(backfilled) == 1
    assert _revision(engine, after.id) > backfilled.pop()

    migrate.downgrade(engine, "0001_inbox_tables")
    columns = {c["name"] for c in inspect(engine).get_columns("agent_messages")}
    assert "revision" not in columns
    assert "message_tombstones" not in inspect(engine).get_table_names()
    migrate.upgrade(engine)
    assert migrate.current_revision(engine) == migrate.head_revision()
    engine.dispose()


def _sqlite_db(tmp_path: Path) -> Database:
    engine = make_engine(f"sqlite:///{tmp_path / 'statehub.db'}")
    migrate.upgrade(engine)
    return Database(engine)


def _two_rows(db: Database, unit: str) -> set[int]:
    """Two messages inserted by one statement in `db.<unit>()`: their revisions."""
    now = datetime(2026, 1, 2, tzinfo=UTC)
    ids = [uuid.uuid4(), uuid.uuid4()]
    rows = [
        {"id": i, "from_agent": "a", "to_agent": "b", "subject": "s", "body": "b",
         "kind": "message", "created_at": now}
        for i in ids
    ]  # fmt: skip
    with getattr(db, unit)() as session:
        session.execute(insert(AgentMessage), rows)
    return {_revision(db.engine, i) for i in ids}


def test_sqlite_lone_sends_draw_one_revision_each_with_the_row_left_closed(
    tmp_path: Path,
) -> None:
    db = _sqlite_db(tmp_path)
    sent = [_send(db) for _ in range(3)]  # `statement()`: no open/close around the INSERT
    reply = _send(db, thread_id=str(sent[0].id))  # `write()`: the row opened and closed

    revisions = [_revision(db.engine, m.id) for m in (*sent, reply)]
    with db.engine.connect() as conn:
        last, state_open = conn.execute(text("SELECT last, open FROM inbox_revision_state")).one()

    assert revisions == [2, 3, 4, 5]  # after the backfill's 1: one revision per send
    assert (last, state_open) == (5, 0)
    db.engine.dispose()


def test_sqlite_statement_is_for_one_row_a_second_row_would_draw_a_second_revision(
    tmp_path: Path,
) -> None:
    """Why `statement()` writes one row: the closed revision row draws per row, so two
    rows in it would be two revisions for one transaction, where `write()` gives one."""
    db = _sqlite_db(tmp_path)

    assert len(_two_rows(db, "statement")) == 2
    assert len(_two_rows(db, "write")) == 1
    db.engine.dispose()


def test_sqlite_writes_from_outside_state_hub_get_fresh_ordered_revisions(tmp_path: Path) -> None:
    """A program without State Hub's hooks never reuses a revision another
    transaction already committed: it draws a fresh one per row."""
    engine = make_engine(f"sqlite:///{tmp_path / 'outside.db'}")
    migrate.upgrade(engine)
    db = Database(engine)
    message = _send(db)
    with engine.begin() as conn:  # not db.write(): no revision hooks
        conn.execute(text("UPDATE agent_messages SET read_at = '2026-01-02 00:00:00.000000'"))
    with engine.begin() as conn:
        conn.execute(text("UPDATE agent_messages SET archived_at = '2026-01-02 00:00:00.000000'"))
    state_open = db.engine.connect().execute(text("SELECT open FROM inbox_revision_state")).scalar()

    revisions_seen = _revision(engine, message.id)

    assert revisions_seen == 4  # backfill 1, send 2, two outside updates 3 and 4
    assert state_open == 0
    engine.dispose()


# -- revision modes (PostgreSQL) -------------------------------------------------------


def test_xid_mode_serves_the_same_contract(pg_db: Database) -> None:
    source.prepare(pg_db, "xid")
    feed = FeedService(pg_db, FrozenClock(), "x")
    old = _send(pg_db)
    new = _send(pg_db, supersedes_id=str(old.id))

    page = once_served(lambda: feed.page("v1:0"), lambda page: bool(page["changes"]))

    assert {c["key"] for c in page["changes"]} == {str(old.id), str(new.id)}
    assert len({c["revision"] for c in page["changes"]}) == 1
    revision = int(page["next_cursor"].split(":")[1])
    assert revision <= int(page["high_water"].split(":")[1])
    assert feed.page(page["next_cursor"])["changes"] == []


def test_switching_revision_mode_keeps_revisions_rising_and_changes_the_epoch(
    pg_db: Database,
) -> None:
    feed = FeedService(pg_db, FrozenClock(), "x")
    source.prepare(pg_db, "lock")
    with pg_db.write() as session:  # push the sequence far ahead of the xid counter
        session.execute(text("SELECT setval('inbox_revision_seq', 10000000)"))
    in_lock = _send(pg_db)
    lock_epoch = feed.page("v1:0")["source_epoch"]

    source.prepare(pg_db, "xid")
    in_xid = _send(pg_db)
    xid_epoch = feed.page("v1:0")["source_epoch"]
    source.prepare(pg_db, "lock")
    back_in_lock = _send(pg_db)

    r_lock, r_xid, r_back = (_revision(pg_db.engine, m.id) for m in (in_lock, in_xid, back_in_lock))
    assert r_lock < r_xid < r_back
    assert len({lock_epoch, xid_epoch, feed.page("v1:0")["source_epoch"]}) == 3


def test_restarting_in_the_same_mode_keeps_the_epoch(pg_db: Database) -> None:
    feed = FeedService(pg_db, FrozenClock(), "x")
    source.prepare(pg_db, "xid")
    before = feed.page("v1:0")["source_epoch"]

    source.prepare(pg_db, "xid")

    assert feed.page("v1:0")["source_epoch"] == before


def test_xid_mode_is_refused_on_sqlite(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    migrate.upgrade(engine)
    with pytest.raises(ValueError, match="needs PostgreSQL"):
        source.prepare(Database(engine), "xid")
    engine.dispose()
