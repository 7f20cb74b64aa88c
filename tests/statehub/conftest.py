"""State Hub fixtures: a migrated database on each engine, an app, a client."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from agenthub.clock import FrozenClock
from agenthub.db import make_engine
from agenthub.statehub import migrate
from agenthub.statehub.app import create_app
from agenthub.statehub.settings import StateHubSettings
from agenthub.statehub.store import Database
from tests.support.databases import migrated, require_pg, temporary_pg_database, truncate
from tests.support.pgbouncer import require_pgbouncer, through

DATA_TABLES = ("message_receipts", "agent_messages", "message_identity_aliases")
# The database kinds a module opts into by overriding `database_url` with
# `statehub_database`: "pgbouncer" is the session's PostgreSQL database reached through
# pgbouncer in transaction pooling mode (operators put one in front of several processes).
WITH_PGBOUNCER = ["sqlite", "pg", "pgbouncer"]
# Pooled URL -> the direct URL of the same database (State Hub LISTENs on that one).
_DIRECT: dict[str, str] = {}


@pytest.fixture(scope="session")
def _pg_statehub_url(pg_database_url: str) -> str:
    return migrated(pg_database_url, migrate.upgrade)


@pytest.fixture(scope="session")
def _pgbouncer_statehub_url(_pg_statehub_url: str) -> str:
    url = through(require_pgbouncer(require_pg()), _pg_statehub_url)
    _DIRECT[url] = _pg_statehub_url
    return url


def statehub_database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A State Hub database at head, empty, of the kind `request.param` names."""
    if request.param == "sqlite":
        return migrated(f"sqlite:///{tmp_path / 'statehub.db'}", migrate.upgrade)
    url: str = request.getfixturevalue("_pg_statehub_url")
    truncate(url, (*DATA_TABLES, "message_tombstones", "receipt_tombstones"))
    if request.param == "pgbouncer":
        pooled: str = request.getfixturevalue("_pgbouncer_statehub_url")
        return pooled
    return url


def direct_url(database_url: str) -> str | None:
    """The direct URL behind a pooled test URL (None for one that is not pooled)."""
    return _DIRECT.get(database_url)


@pytest.fixture(params=["sqlite", "pg"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A State Hub database at head, empty: a new SQLite file, or the session's PostgreSQL."""
    return statehub_database(request, tmp_path)


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    eng = make_engine(database_url)
    yield eng
    eng.dispose()


@pytest.fixture
def db(engine: Engine) -> Database:
    return Database(engine)


@pytest.fixture
def pg_db(pg_server_url: str) -> Iterator[Database]:
    """A PostgreSQL database of its own, for a test that switches the revision mode."""
    with temporary_pg_database(pg_server_url, prefix="agenthub_mode") as url:
        engine = make_engine(url)
        migrate.upgrade(engine)
        yield Database(engine)
        engine.dispose()


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def settings(database_url: str) -> StateHubSettings:
    return StateHubSettings(
        database_url=database_url, instance_label="test-hub", listen_url=direct_url(database_url)
    )


@pytest.fixture
def client(settings: StateHubSettings, clock: FrozenClock) -> Iterator[TestClient]:
    with TestClient(create_app(settings, clock=clock)) as test_client:
        yield test_client


# -- helpers added for the inbox test suite ------------------------------------

Message = dict[str, Any]


class Send(Protocol):
    """The `send` fixture: POST /messages/ with the given fields over the defaults."""

    def __call__(self, **fields: Any) -> Message: ...


AddAlias = Callable[[str, str], None]


def parse_ts(value: str | None) -> datetime | None:
    """A timestamp from a response body, as an aware datetime (None stays None)."""
    return None if value is None else datetime.fromisoformat(value)


@pytest.fixture
def send(client: TestClient) -> Send:
    """POST /messages/ with sensible defaults (alice → bob); fails the test unless 201."""

    def _send(**fields: Any) -> Message:
        body = {"from_agent": "alice", "to_agent": "bob", "subject": "hello", "body": "hi"}
        body.update(fields)
        response = client.post("/messages/", json=body)
        assert response.status_code == 201, response.text
        message: Message = response.json()
        return message

    return _send


@pytest.fixture
def add_alias(engine: Engine) -> AddAlias:
    """Insert an identity alias the way an operator does: by SQL."""

    def _add(alias: str, canonical: str) -> None:
        with engine.begin() as conn:
            conn.execute(
                text("insert into message_identity_aliases (alias, canonical) values (:a, :c)"),
                {"a": alias, "c": canonical},
            )

    return _add


@pytest.fixture(params=["sqlite", "pg"])
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with no schema at all: a new SQLite path, or a new PostgreSQL database
    (never the shared session database, so migrations can run up and down freely)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    with temporary_pg_database(require_pg(), prefix="agenthub_sh_mig") as url:
        yield url
