"""State Hub behind pgbouncer in transaction pooling mode, where each transaction may run
on another server connection: no server-side prepared statements, feed wakes through a
LISTEN on a direct connection (or a poll with a warning without one), and pool limits
from the settings. The broken variants run today's habits through the same pgbouncer."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, func, select

from agenthub.clock import SystemClock
from agenthub.db import make_engine
from agenthub.statehub.app import create_app
from agenthub.statehub.inbox import InboxService, ListQuery
from agenthub.statehub.models import AgentMessage
from agenthub.statehub.schemas import MessageCreate
from agenthub.statehub.settings import StateHubSettings
from agenthub.statehub.store import Database
from tests.statehub.conftest import statehub_database
from tests.statehub.test_feed_longpoll import outside_write
from tests.support.servers import live_server

WRITERS = 8
SENDS = 30


@pytest.fixture(params=["pg"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The session's PostgreSQL database, emptied: the direct URL."""
    return statehub_database(request, tmp_path)


@pytest.fixture
def pooled_url(database_url: str, _pgbouncer_statehub_url: str) -> str:
    """The same database through pgbouncer."""
    return _pgbouncer_statehub_url


def _hammer(engine: Engine) -> list[str]:
    """8 threads send and list through `engine` at once; returns the errors."""
    db = Database(engine)
    inbox = InboxService(db, SystemClock(), news_ttl_days=30)
    errors: list[str] = []

    def writer(n: int) -> None:
        for i in range(SENDS):
            try:
                inbox.send(
                    MessageCreate(from_agent=f"w{n}", to_agent="b", subject=f"{i}", body="x")
                )
                inbox.list_messages(ListQuery(to_agent="b", limit=5, peek=True))
            except Exception as exc:
                errors.append(str(exc).splitlines()[0])

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def _stored(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(AgentMessage)).scalar_one())


def test_psycopg_prepares_break_through_pgbouncer(pooled_url: str) -> None:
    """The broken variant: psycopg's default prepares a query on the server after five
    executions; through a transaction pooler the name is unknown on (or already used
    by) the server connection the next transaction gets."""
    engine = make_engine(pooled_url, connect_args={"prepare_threshold": 5})
    try:
        errors = _hammer(engine)
    finally:
        engine.dispose()

    assert errors, "forced prepares never failed through pgbouncer: the load proves nothing"
    assert all("prepared statement" in error for error in errors), errors[:3]


def test_the_same_load_through_pgbouncer_never_fails(pooled_url: str) -> None:
    engine = make_engine(pooled_url)
    try:
        errors = _hammer(engine)
        assert errors == []
        assert _stored(engine) == WRITERS * SENDS
    finally:
        engine.dispose()


def _parked_read_of_an_outside_write(base: str, outside: Engine) -> float:
    """Seconds a parked feed reader waits for a write committed by another process."""
    head = httpx.get(f"{base}/messages/feed", params={"after": "v1:0"}).json()["high_water"]

    writer = threading.Timer(0.3, lambda: outside_write(outside))
    writer.start()
    started = time.monotonic()
    page = httpx.get(f"{base}/messages/feed", params={"after": head, "wait": 20}, timeout=30).json()
    elapsed = time.monotonic() - started
    writer.join()
    assert len(page["changes"]) == 1
    return elapsed - 0.3


@pytest.fixture
def outside(database_url: str) -> Iterator[Engine]:
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


def _wake_log(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "agenthub.statehub.app"]


def test_without_a_listen_url_pgbouncer_falls_back_to_polling_with_a_warning(
    pooled_url: str, outside: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """LISTEN through pgbouncer hears nothing (its server connection serves other
    clients); the probe notices, says which setting fixes it, and the poll still wakes
    the reader within a poll interval instead of at the end of its wait."""
    caplog.set_level(logging.WARNING, logger="agenthub.statehub.app")
    settings = StateHubSettings(database_url=pooled_url, instance_label="pgb")
    with live_server(create_app(settings)) as base:
        deadline = time.monotonic() + 10
        while not _wake_log(caplog) and time.monotonic() < deadline:
            time.sleep(0.05)
        waited = _parked_read_of_an_outside_write(base, outside)

    assert any("STATEHUB_LISTEN_URL" in line for line in _wake_log(caplog)), caplog.text
    assert waited < 2


def test_a_direct_listen_url_wakes_a_pooled_state_hub_at_once(
    pooled_url: str, database_url: str, outside: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agenthub.statehub.app")
    settings = StateHubSettings(
        database_url=pooled_url,
        instance_label="pgb",
        listen_url=database_url,
        # A slow poll, so a wake in time can only have come from LISTEN.
        wake_poll_interval_s=30,
    )
    with live_server(create_app(settings)) as base:
        waited = _parked_read_of_an_outside_write(base, outside)

    assert _wake_log(caplog) == []
    assert waited < 2


def test_without_listen_or_a_quick_poll_a_pooled_state_hub_sleeps_through_a_write(
    pooled_url: str, outside: Engine
) -> None:
    """The broken variant of the test above: LISTEN through pgbouncer and a 30 s poll,
    so the reader sleeps through the write to the end of its wait (the 9.5 s wakes
    operators saw through pgbouncer)."""
    settings = StateHubSettings(
        database_url=pooled_url, instance_label="pgb", wake_poll_interval_s=30
    )
    with live_server(create_app(settings)) as base:
        time.sleep(0.5)  # past the first poll probe
        head = httpx.get(f"{base}/messages/feed", params={"after": "v1:0"}).json()["high_water"]
        writer = threading.Timer(0.3, lambda: outside_write(outside))
        writer.start()
        started = time.monotonic()
        httpx.get(f"{base}/messages/feed", params={"after": head, "wait": 3}, timeout=30)
        elapsed = time.monotonic() - started
        writer.join()

    assert elapsed > 2.9


def _prepare_threshold(engine: Engine) -> int | None:
    raw = engine.raw_connection()
    try:
        threshold: int | None = raw.driver_connection.prepare_threshold  # type: ignore[union-attr]
        return threshold
    finally:
        raw.close()


def test_only_pooled_connections_give_up_server_side_prepares(
    database_url: str, pooled_url: str
) -> None:
    """A direct connection keeps psycopg's prepares (they halve an inbox list's time);
    one through pgbouncer, which reports its own process id at connect, has none."""
    direct, pooled = make_engine(database_url), make_engine(pooled_url)
    try:
        assert _prepare_threshold(direct) == 5
        assert _prepare_threshold(pooled) is None
    finally:
        direct.dispose()
        pooled.dispose()


def test_the_pool_limits_are_the_settings(pooled_url: str) -> None:
    settings = StateHubSettings(
        database_url=pooled_url, instance_label="pgb", pool_size=3, pool_max_overflow=1
    )
    app = create_app(settings)
    with live_server(app):
        pool = app.state.db.engine.pool
        assert (pool.size(), pool._max_overflow) == (3, 1)
