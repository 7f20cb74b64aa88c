"""Bring a State Hub database to the current Alembic head (or back to base)."""

from __future__ import annotations

from pathlib import Path

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


# The service's migration API, as module functions.
alembic_config = MIGRATIONS.config
head_revision = MIGRATIONS.head
current_revision = MIGRATIONS.current
upgrade = MIGRATIONS.upgrade
downgrade = MIGRATIONS.downgrade
