"""Test databases: a fresh SQLite file per test, and one throw-away PostgreSQL
database per test session (named after the process, so parallel runs from
several checkouts never share one), emptied between tests."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import pytest
from sqlalchemy import Engine, create_engine, inspect, text
from sqlalchemy.engine import make_url

from agenthub.db import make_engine, normalize_url

PG_ENV = "AGENTHUB_TEST_PG_URL"
REDIS_ENV = "AGENTHUB_TEST_REDIS_URL"


def services_required() -> bool:
    """In CI a missing PostgreSQL or Redis fails the run instead of skipping tests."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes") or bool(
        os.environ.get("AGENTHUB_REQUIRE_SERVICES")
    )


def pg_server_url() -> str | None:
    return os.environ.get(PG_ENV) or None


def require_pg() -> str:
    url = pg_server_url()
    if url is None:
        if services_required():
            pytest.fail(f"{PG_ENV} is not set but CI requires PostgreSQL", pytrace=False)
        pytest.skip(f"PostgreSQL tests need {PG_ENV}")
    return url


@contextmanager
def temporary_pg_database(server_url: str, prefix: str = "agenthub_t") -> Iterator[str]:
    """Create a new empty database on the server; drop it afterwards. Yields its URL."""
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(normalize_url(server_url), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # pragma: no cover - depends on the machine
        admin.dispose()
        if services_required():
            pytest.fail(f"PostgreSQL at {server_url} is unusable: {exc}", pytrace=False)
        pytest.skip(f"PostgreSQL at {server_url} is unusable: {exc}")
    url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def migrated(url: str, upgrade: Callable[[Engine], None]) -> str:
    """Bring the database at `url` to its service's head; returns `url`."""
    engine = make_engine(url)
    try:
        upgrade(engine)
    finally:
        engine.dispose()
    return url


@contextmanager
def migrated_pg_database(
    server_url: str, prefix: str, upgrade: Callable[[Engine], None]
) -> Iterator[str]:
    """A throw-away PostgreSQL database at a service's head."""
    with temporary_pg_database(server_url, prefix=prefix) as url:
        yield migrated(url, upgrade)


def truncate(url: str, tables: Sequence[str]) -> None:
    """Empty `tables` (those that exist) between tests sharing one PostgreSQL database."""
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            existing = set(inspect(conn).get_table_names())
            present = [t for t in tables if t in existing]
            if present:
                conn.execute(text(f"TRUNCATE {', '.join(present)} CASCADE"))
    finally:
        engine.dispose()
