"""State Hub fixtures: a migrated database on each engine, an app, a client."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from agenthub.clock import FrozenClock
from agenthub.db import make_engine
from agenthub.statehub import migrate
from agenthub.statehub.app import create_app
from agenthub.statehub.settings import StateHubSettings
from agenthub.statehub.store import Database
from tests.support.databases import require_pg, temporary_pg_database

DATA_TABLES = ("message_receipts", "agent_messages", "message_identity_aliases")


@pytest.fixture(scope="session")
def _pg_statehub_url(pg_database_url: str) -> str:
    engine = make_engine(pg_database_url)
    try:
        migrate.upgrade(engine)
    finally:
        engine.dispose()
    return pg_database_url


def _empty_pg(url: str) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            existing = {
                row[0]
                for row in conn.execute(
                    text("select tablename from pg_tables where schemaname = current_schema()")
                )
            }
            tables = [
                t
                for t in (*DATA_TABLES, "message_tombstones", "receipt_tombstones")
                if t in existing
            ]
            conn.execute(text(f"TRUNCATE {', '.join(tables)} CASCADE"))
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "pg"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A State Hub database at head, empty: a new SQLite file, or the session's PostgreSQL."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'statehub.db'}"
        engine = make_engine(url)
        try:
            migrate.upgrade(engine)
        finally:
            engine.dispose()
        return url
    url: str = request.getfixturevalue("_pg_statehub_url")
    _empty_pg(url)
    return url


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    eng = make_engine(database_url)
    yield eng
    eng.dispose()


@pytest.fixture
def db(engine: Engine) -> Database:
    return Database(engine)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def settings(database_url: str) -> StateHubSettings:
    return StateHubSettings(database_url=database_url, instance_label="test-hub")


@pytest.fixture
def client(settings: StateHubSettings, clock: FrozenClock) -> Iterator[TestClient]:
    with TestClient(create_app(settings, clock=clock)) as test_client:
        yield test_client


# -- helpers added for the inbox test suite ------------------------------------

Message = dict[str, Any]


def parse_ts(value: str | None) -> datetime | None:
    """A timestamp from a response body, as an aware datetime (None stays None)."""
    return None if value is None else datetime.fromisoformat(value)


@pytest.fixture
def send(client: TestClient) -> Callable[..., Message]:
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
def add_alias(engine: Engine) -> Callable[[str, str], None]:
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
