"""hub-core behind pgbouncer in transaction pooling mode: its follower follows a State Hub
whose database is behind pgbouncer into a hub-core database behind pgbouncer too, and
the one-follower lock holds there (a session lock, the broken variant, does not)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import Engine, text

from agenthub.db import make_engine
from agenthub.hubcore.app import create_app as create_hubcore
from agenthub.hubcore.followlock import FOLLOW_LOCK_KEY, AnotherFollower, sole_follower
from agenthub.hubcore.repository import PROJECTION_TABLES
from agenthub.hubcore.settings import HubCoreSettings
from agenthub.statehub.app import create_app as create_statehub
from agenthub.statehub.settings import StateHubSettings
from tests.hubcore.conftest import STATEHUB_TABLES
from tests.hubcore.follow_support import ok, send
from tests.hubcore.test_follow_end_to_end import AGENT, TOKEN, read_until
from tests.support.databases import require_pg, truncate
from tests.support.pgbouncer import require_pgbouncer, through
from tests.support.servers import live_server


@pytest.fixture
def pooled_hubcore_url(_pg_hubcore_url: str) -> str:
    truncate(_pg_hubcore_url, PROJECTION_TABLES)
    return through(require_pgbouncer(require_pg()), _pg_hubcore_url)


@pytest.fixture
def pooled_engines(pooled_hubcore_url: str) -> Iterator[tuple[Engine, Engine]]:
    """Two processes' engines on hub-core's database through pgbouncer."""
    first, second = make_engine(pooled_hubcore_url), make_engine(pooled_hubcore_url)
    yield first, second
    first.dispose()
    second.dispose()


def test_hub_core_follows_a_pooled_state_hub_into_a_pooled_database(
    _pg_statehub_source_url: str, pooled_hubcore_url: str
) -> None:
    truncate(_pg_statehub_source_url, STATEHUB_TABLES)
    pooled_statehub = through(require_pgbouncer(require_pg()), _pg_statehub_source_url)
    statehub = create_statehub(
        StateHubSettings(database_url=pooled_statehub, listen_url=_pg_statehub_source_url)
    )
    with live_server(statehub) as statehub_base, httpx.Client(base_url=statehub_base) as source:
        hubcore = create_hubcore(
            HubCoreSettings(
                database_url=pooled_hubcore_url,
                inbox_reads=True,
                operator_token=TOKEN,
                inbox_agent=AGENT,
                statehub_url=statehub_base,
                follow_wait_s=2,
                pool_size=2,
                pool_max_overflow=2,
            )
        )
        with live_server(hubcore) as hubcore_base, httpx.Client(base_url=hubcore_base) as reader:
            read_until(reader, send(source, subject="one"))
            for n in range(20):
                started = time.monotonic()
                response = read_until(reader, send(source, subject=f"live {n}"))
                elapsed = time.monotonic() - started
                assert elapsed < 2.0, f"the change took {elapsed:.2f}s: long-poll did not wake"
            assert response.headers["x-hub-core-read-mode"] == "live"
            health = ok(reader.get("/healthz"))
            assert health["cursor"] == health["high_water"] and health["last_error"] is None
            assert hubcore.state.db.engine.pool.size() == 2


def test_a_second_follower_through_pgbouncer_is_refused(
    pooled_engines: tuple[Engine, Engine],
) -> None:
    first, second = pooled_engines
    with sole_follower(first):
        with first.connect() as conn:  # the pool keeps serving other transactions
            assert conn.execute(text("select 1")).scalar() == 1
        with pytest.raises(AnotherFollower), sole_follower(second):
            pass
    with sole_follower(second):
        pass


def test_a_session_lock_through_pgbouncer_lets_a_second_follower_in(
    pooled_engines: tuple[Engine, Engine], _pg_hubcore_url: str
) -> None:
    """The broken variant (the lock before this change): a session lock stays on the
    server connection that took it, which pgbouncer hands to the next transaction, of
    any client; there the lock is re-entrant, so a second follower takes it too."""
    first, second = pooled_engines
    take = text("select pg_try_advisory_lock(:key)")
    try:
        with first.connect() as conn:
            assert conn.execute(take, {"key": FOLLOW_LOCK_KEY}).scalar() is True
            conn.commit()
            with second.connect() as other:
                assert other.execute(take, {"key": FOLLOW_LOCK_KEY}).scalar() is True
                other.commit()
    finally:
        # Any unlock through pgbouncer may land on another server connection: end the
        # one holding it, directly.
        direct = make_engine(_pg_hubcore_url)
        with direct.connect() as conn:
            conn.execute(
                text(
                    "select pg_terminate_backend(pid) from pg_locks"
                    " where locktype = 'advisory' and pid <> pg_backend_pid()"
                    " and database = (select oid from pg_database"
                    " where datname = current_database())"
                )
            )
            conn.commit()
        direct.dispose()
