"""Alembic environment for State Hub. Run through `agenthub.statehub.migrate`."""

from __future__ import annotations

from agenthub.migrations import run_env
from agenthub.statehub.migrate import include_object
from agenthub.statehub.models import Base

run_env(Base.metadata, include_object)
