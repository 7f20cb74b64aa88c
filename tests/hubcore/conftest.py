"""hub-core fixtures: an empty, migrated hub-core database on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from agenthub.db import make_engine
from agenthub.hubcore import migrate
from agenthub.hubcore.repository import PROJECTION_TABLES
from agenthub.hubcore.store import Database
from tests.support.databases import require_pg, temporary_pg_database


@pytest.fixture(scope="session")
def _pg_hubcore_url() -> Iterator[str]:
    """hub-core's own PostgreSQL database (never State Hub's: hub-core has its own)."""
    server = require_pg()
    with temporary_pg_database(server, prefix="agenthub_hc") as url:
        engine = make_engine(url)
        try:
            migrate.upgrade(engine)
        finally:
            engine.dispose()
        yield url


def empty_hubcore_pg(url: str) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text(f"TRUNCATE {', '.join(PROJECTION_TABLES)} CASCADE"))
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "pg"])
def hubcore_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty hub-core database at head: a new SQLite file, or the session's PostgreSQL."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'hubcore.db'}"
        engine = make_engine(url)
        try:
            migrate.upgrade(engine)
        finally:
            engine.dispose()
        return url
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
