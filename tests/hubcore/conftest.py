"""hub-core fixtures: an empty, migrated hub-core database on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from agenthub.db import make_engine
from agenthub.hubcore import migrate
from agenthub.hubcore.repository import PROJECTION_TABLES
from agenthub.hubcore.store import Database
from agenthub.statehub import migrate as statehub_migrate
from tests.support.databases import migrated, migrated_pg_database, require_pg, truncate


@pytest.fixture(scope="session")
def _pg_hubcore_url() -> Iterator[str]:
    """hub-core's own PostgreSQL database (never State Hub's: hub-core has its own)."""
    with migrated_pg_database(require_pg(), "agenthub_hc", migrate.upgrade) as url:
        yield url


def empty_hubcore_pg(url: str) -> None:
    truncate(url, PROJECTION_TABLES)


@pytest.fixture(params=["sqlite", "pg"])
def hubcore_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty hub-core database at head: a new SQLite file, or the session's PostgreSQL."""
    if request.param == "sqlite":
        return migrated(f"sqlite:///{tmp_path / 'hubcore.db'}", migrate.upgrade)
    url: str = request.getfixturevalue("_pg_hubcore_url")
    empty_hubcore_pg(url)
    return url


@pytest.fixture
def hubcore_engine(hubcore_url: str) -> Iterator[Engine]:
    engine = make_engine(hubcore_url)
    yield engine
    engine.dispose()


@pytest.fixture
def hubcore_db(hubcore_engine: Engine) -> Database:
    return Database(hubcore_engine)


@pytest.fixture(scope="session")
def _pg_statehub_source_url() -> Iterator[str]:
    """A State Hub database on PostgreSQL, as the source hub-core captures from."""
    with migrated_pg_database(require_pg(), "agenthub_hcsrc", statehub_migrate.upgrade) as url:
        yield url


STATEHUB_TABLES = (
    "message_receipts", "agent_messages", "message_tombstones",
    "receipt_tombstones", "message_identity_aliases", "statehub_meta",
)  # fmt: skip


@pytest.fixture
def statehub_url(hubcore_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """An empty State Hub database on the same kind of database as `hubcore_url`."""
    if hubcore_url.startswith("sqlite"):
        return migrated(f"sqlite:///{tmp_path / 'statehub.db'}", statehub_migrate.upgrade)
    url: str = request.getfixturevalue("_pg_statehub_source_url")
    truncate(url, STATEHUB_TABLES)
    return url
