"""Alembic plumbing shared by the services that own a database.

Each service keeps its own migration environment (`<service>/migrations/`);
this module runs it: upgrade and downgrade with replicas taking turns, the
current and head revisions, and the `env.py` body itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alembic import command, context
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, MetaData, text

from agenthub.db import make_engine

IncludeObject = Callable[[object, str | None, str, bool, object], bool]


def include_everything(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    return True


@dataclass(frozen=True)
class Migrations:
    """One service's migration environment."""

    directory: Path
    # Advisory lock under which PostgreSQL migrators take turns (unique per service).
    lock_key: int

    def config(self, connection: Connection | None = None, url: str | None = None) -> Config:
        cfg = Config()
        cfg.set_main_option("script_location", str(self.directory))
        if url is not None:
            cfg.set_main_option("sqlalchemy.url", url)
        if connection is not None:
            cfg.attributes["connection"] = connection
        return cfg

    def head(self) -> str:
        head = ScriptDirectory.from_config(self.config()).get_current_head()
        assert head is not None
        return head

    def current(self, engine: Engine) -> str | None:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()

    def upgrade(self, engine: Engine, target: str = "head") -> None:
        with self._migrating(engine) as conn:
            command.upgrade(self.config(conn), target)

    def downgrade(self, engine: Engine, target: str = "base") -> None:
        with self._migrating(engine) as conn:
            command.downgrade(self.config(conn), target)

    @contextmanager
    def _migrating(self, engine: Engine) -> Iterator[Connection]:
        """A connection for one migration run: our turn, and on SQLite no foreign-key actions.

        Alembic's SQLite batch mode rebuilds a table (copy, DROP, rename). With
        foreign keys enforced, that DROP's implicit DELETE fires ON DELETE CASCADE /
        SET NULL: every receipt and thread link would vanish. The pragma only takes
        effect outside a transaction, so it goes to the driver before BEGIN;
        integrity is checked before commit instead (only when the revision moved,
        so a start on an unchanged schema costs no table scan).
        """
        with engine.connect() as conn:
            sqlite = conn.dialect.name == "sqlite"
            driver: Any = conn.connection.driver_connection if sqlite else None
            if sqlite:
                driver.execute("PRAGMA foreign_keys=OFF")
            try:
                self._take_turns(conn)
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

    def _take_turns(self, conn: Connection) -> None:
        """Hold the database's migration lock until `conn` commits.

        Every replica migrates on start; without this, two starting at once both
        see an old version and both run the same DDL, and one crashes (duplicate
        key on PostgreSQL, "database is locked" on SQLite). The one that waits
        then sees head.
        """
        if conn.dialect.name == "postgresql":
            conn.execute(text("select pg_advisory_xact_lock(:key)"), {"key": self.lock_key})
        elif conn.dialect.name == "sqlite":
            conn.execution_options(sqlite_begin="IMMEDIATE")
            conn.exec_driver_sql("select 1")


def run_env(metadata: MetaData, include_object: IncludeObject = include_everything) -> None:
    """The body of a service's `env.py`: run online against the given or configured database."""
    config = context.config

    def run(connection: Connection) -> None:
        context.configure(
            connection=connection,
            target_metadata=metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            transaction_per_migration=True,
            include_object=include_object,
        )
        with context.begin_transaction():
            context.run_migrations()

    if context.is_offline_mode():
        raise SystemExit(
            "offline (SQL script) migrations are not supported; run against a database"
        )
    connection = config.attributes.get("connection")
    if connection is not None:
        run(connection)
        return
    engine = make_engine(config.get_main_option("sqlalchemy.url") or "")
    try:
        with engine.connect() as conn:
            run(conn)
    finally:
        engine.dispose()
