"""Bring a hub-core database to the current Alembic head (or back to base)."""

from __future__ import annotations

from pathlib import Path

from agenthub.migrations import Migrations

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
MIGRATIONS = Migrations(MIGRATIONS_DIR, lock_key=5348490002)


# The service's migration API, as module functions.
alembic_config = MIGRATIONS.config
head_revision = MIGRATIONS.head
current_revision = MIGRATIONS.current
upgrade = MIGRATIONS.upgrade
downgrade = MIGRATIONS.downgrade
