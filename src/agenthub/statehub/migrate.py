"""Bring a State Hub database to the current Alembic head (or back to base)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
# Advisory lock key under which PostgreSQL migrators take turns (any constant unique to us).
MIGRATION_LOCK_KEY = 5348490001


# Tables the revision triggers own on SQLite; no ORM model describes them.
MACHINERY_TABLES = frozenset({"inbox_revision_state"})


def include_object(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    """Autogenerate filter: leave the trigger machinery's own tables alone."""
    return not (type_ == "table" and name in MACHINERY_TABLES)


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


def upgrade(engine: Engine, target: str = "head") -> None:
    with engine.connect() as conn:
        _take_turns(conn)
        command.upgrade(alembic_config(conn), target)
        conn.commit()


def downgrade(engine: Engine, target: str = "base") -> None:
    with engine.connect() as conn:
        _take_turns(conn)
        command.downgrade(alembic_config(conn), target)
        conn.commit()
