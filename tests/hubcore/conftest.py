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
from agenthub.statehub import migrate as statehub_migrate
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


@pytest.fixture(scope="session")
def _pg_statehub_source_url() -> Iterator[str]:
    """A State Hub database on PostgreSQL, as the source hub-core captures from."""
    server = require_pg()
    with temporary_pg_database(server, prefix="agenthub_hcsrc") as url:
        engine = make_engine(url)
        try:
            statehub_migrate.upgrade(engine)
        finally:
            engine.dispose()
        yield url


def _empty_statehub_pg(url: str) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "TRUNCATE message_receipts, agent_messages, message_tombstones, "
                    "receipt_tombstones, message_identity_aliases, statehub_meta CASCADE"
                )
            )
    finally:
        engine.dispose()


@pytest.fixture
def statehub_url(hubcore_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """An empty State Hub database on the same kind of database as `hubcore_url`."""
    if hubcore_url.startswith("sqlite"):
        url = f"sqlite:///{tmp_path / 'statehub.db'}"
        engine = make_engine(url)
        try:
            statehub_migrate.upgrade(engine)
        finally:
            engine.dispose()
        return url
    url = request.getfixturevalue("_pg_statehub_source_url")
    _empty_statehub_pg(url)
    return url
