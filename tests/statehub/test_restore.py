"""A restored source is detectable: a consumer whose cursor sits below a reused
high water still gets 409 through `source_epoch`."""

from __future__ import annotations

import os
import shutil
import sqlite3
import uuid
from pathlib import Path

from sqlalchemy import create_engine, text

from agenthub.clock import FrozenClock
from agenthub.db import make_engine, normalize_url
from agenthub.statehub import migrate, source
from agenthub.statehub.errors import ResnapshotConflict
from agenthub.statehub.feed import FeedService
from agenthub.statehub.inbox import InboxService
from agenthub.statehub.schemas import MessageCreate
from agenthub.statehub.store import Database
from tests.support.databases import temporary_pg_database


def _send(db: Database, n: int) -> None:
    data = {"from_agent": "a", "to_agent": "b", "subject": f"{n}", "body": "x"}
    InboxService(db, FrozenClock()).send(MessageCreate.model_validate(data))


def _open(url: str) -> tuple[Database, FeedService]:
    engine = make_engine(url)
    migrate.upgrade(engine)
    db = Database(engine)
    source.prepare(db, "lock")
    feed = FeedService(db, FrozenClock(), "hub")
    feed.check_restore()  # as the app does at startup
    return db, feed


def test_sqlite_file_restored_from_an_older_copy_changes_the_epoch(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    db, feed = _open(f"sqlite:///{path}")
    _send(db, 1)
    live, backup = sqlite3.connect(path), sqlite3.connect(tmp_path / "backup.db")
    live.backup(backup)
    live.close()
    backup.close()
    _send(db, 2)
    _send(db, 3)
    seen = feed.page("v1:0")  # a consumer follows to the newest revision
    db.engine.dispose()

    for suffix in ("-wal", "-shm"):
        if os.path.exists(f"{path}{suffix}"):
            os.remove(f"{path}{suffix}")
    shutil.copy(tmp_path / "backup.db", path)
    db, feed = _open(f"sqlite:///{path}")
    _send(db, 4)  # the restored source reuses revisions the consumer already passed
    _send(db, 5)

    try:
        feed.page(seen["next_cursor"], source_epoch=seen["source_epoch"])
    except ResnapshotConflict:
        pass
    else:  # pragma: no cover - the failure this test exists for
        raise AssertionError("a consumer of the restored source was not told to re-snapshot")
    assert feed.page("v1:0")["source_epoch"] != seen["source_epoch"]
    db.engine.dispose()


def test_sqlite_restart_without_restore_keeps_the_epoch(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'hub.db'}"
    db, feed = _open(url)
    _send(db, 1)
    before = feed.page("v1:0")["source_epoch"]
    db.engine.dispose()

    db, feed = _open(url)
    _send(db, 2)

    assert feed.page("v1:0")["source_epoch"] == before
    db.engine.dispose()


def test_postgres_copy_of_the_same_rows_is_another_epoch(pg_server_url: str) -> None:
    """A dump restored into a new database holds identical rows (instance label,
    generation, revisions) but is a different history: its epoch differs."""
    with temporary_pg_database(pg_server_url, prefix="agenthub_orig") as url:
        db, feed = _open(url)
        _send(db, 1)
        original = feed.page("v1:0")
        db.engine.dispose()

        copy_name = f"agenthub_copy_{uuid.uuid4().hex[:8]}"
        admin = create_engine(normalize_url(pg_server_url), isolation_level="AUTOCOMMIT")
        original_name = normalize_url(url).database
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{copy_name}" TEMPLATE "{original_name}"'))
        try:
            copy_url = normalize_url(url).set(database=copy_name).render_as_string(False)
            copy_db, copy_feed = _open(copy_url)
            copied = copy_feed.page("v1:0")
            copy_db.engine.dispose()
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{copy_name}" WITH (FORCE)'))
            admin.dispose()

    assert copied["high_water"] == original["high_water"]
    assert copied["source_epoch"] != original["source_epoch"]
