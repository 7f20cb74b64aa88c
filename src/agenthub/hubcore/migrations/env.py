"""Alembic environment for hub-core. Run through `agenthub.hubcore.migrate`."""

from __future__ import annotations

from agenthub.hubcore.models import Base
from agenthub.migrations import run_env

run_env(Base.metadata)
