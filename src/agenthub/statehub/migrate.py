"""Bring a State Hub database to the current Alembic head (or back to base)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
# Advisory lock key under which PostgreSQL migrators take turns (any constant unique to us).
MIGRATION_LOCK_KEY = 5348490001


def alembic_config(connection: Connection | None = None, url: str | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url)
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def _take_turns(conn: Connection) -> None:
    """Hold the database's migration lock until `conn` commits.

    Every replica migrates on start; without this, two starting at once both see an
    old version and both run the same DDL, and one crashes (duplicate key on
    PostgreSQL, "database is locked" on SQLite). The one that waits then sees head.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("select pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
    elif conn.dialect.name == "sqlite":
        conn.execution_options(sqlite_begin="IMMEDIATE")
        conn.exec_driver_sql("select 1")


@contextmanager
def _migrating(engine: Engine) -> Iterator[Connection]:
    """A connection for one migration run: our turn, and on SQLite no foreign-key actions.

    Alembic's SQLite batch mode rebuilds a table (copy, DROP, rename). With foreign
    keys enforced, that DROP's implicit DELETE fires ON DELETE CASCADE / SET NULL:
    every receipt and thread link would vanish. The pragma only takes effect outside
    a transaction, so it goes to the driver before BEGIN; integrity is checked
    before commit instead (only when the revision moved, so a start on an
    unchanged schema costs no table scan).
    """
    with engine.connect() as conn:
        sqlite = conn.dialect.name == "sqlite"
        driver: Any = conn.connection.driver_connection if sqlite else None
        if sqlite:
            driver.execute("PRAGMA foreign_keys=OFF")
        try:
            _take_turns(conn)
            before = MigrationContext.configure(conn).get_current_revision()
            yield conn
            after = MigrationContext.configure(conn).get_current_revision()
            if sqlite and after != before:
                dangling = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if dangling:
                    raise RuntimeError(
                        f"migration left {len(dangling)} rows with dangling foreign keys "
                        f"(first: {tuple(dangling[0])}); nothing was committed"
                    )
            conn.commit()
        finally:
            if sqlite:
                conn.rollback()
                driver.execute("PRAGMA foreign_keys=ON")


def upgrade(engine: Engine, target: str = "head") -> None:
    with _migrating(engine) as conn:
        command.upgrade(alembic_config(conn), target)


def downgrade(engine: Engine, target: str = "base") -> None:
    with _migrating(engine) as conn:
        command.downgrade(alembic_config(conn), target)
