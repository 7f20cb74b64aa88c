"""Bring a State Hub database to the current Alembic head (or back to base)."""

from __future__ import annotations

from pathlib import Path

from alembic.config import Config
from sqlalchemy import Connection, Engine

from agenthub.migrations import Migrations

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
MIGRATIONS = Migrations(MIGRATIONS_DIR, lock_key=5348490001)
# Tables the revision triggers own on SQLite; no ORM model describes them.
MACHINERY_TABLES = frozenset({"inbox_revision_state"})


def include_object(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    """Autogenerate filter: leave the trigger machinery's own tables alone."""
    return not (type_ == "table" and name in MACHINERY_TABLES)


def alembic_config(connection: Connection | None = None, url: str | None = None) -> Config:
    return MIGRATIONS.config(connection, url)


def head_revision() -> str:
    return MIGRATIONS.head()


def current_revision(engine: Engine) -> str | None:
    return MIGRATIONS.current(engine)


def upgrade(engine: Engine, target: str = "head") -> None:
    MIGRATIONS.upgrade(engine, target)


def downgrade(engine: Engine, target: str = "base") -> None:
    MIGRATIONS.downgrade(engine, target)
