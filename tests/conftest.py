"""Fixtures shared by every service's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.databases import require_pg, temporary_pg_database


@pytest.fixture(scope="session")
def pg_database_url() -> Iterator[str]:
    """One PostgreSQL database for the whole session (tests empty what they use)."""
    server = require_pg()
    with temporary_pg_database(server) as url:
        yield url


@pytest.fixture
def pg_server_url() -> str:
    return require_pg()
