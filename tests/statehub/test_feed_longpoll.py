"""Long-poll on the feed: `wait=` parks until a revision above `after` is
committed, on a real server over HTTP; wakes come from the database on
PostgreSQL (writes from any session) and in-process or by watermark poll
otherwise."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, insert

from agenthub.clock import FrozenClock, SystemClock
from agenthub.db import make_engine
from agenthub.statehub.app import create_app
from agenthub.statehub.feed import FeedService
from agenthub.statehub.models import AgentMessage
from agenthub.statehub.settings import StateHubSettings
from agenthub.statehub.store import Database
from agenthub.statehub.wake import FeedWake
from tests.statehub.conftest import WITH_PGBOUNCER, direct_url, statehub_database
from tests.support.databases import temporary_pg_database
from tests.support.servers import live_server


def _message() -> dict[str, Any]:
    return {"from_agent": "a", "to_agent": "b", "subject": "s", "body": "b"}


@pytest.fixture(params=WITH_PGBOUNCER)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Wakes through pgbouncer too: State Hub LISTENs on the direct URL beside it."""
    return statehub_database(request, tmp_path)


@pytest.fixture
def hub(database_url: str) -> Iterator[str]:
    settings = StateHubSettings(
        database_url=database_url, instance_label="lp", listen_url=direct_url(database_url)
    )
    app = create_app(settings)
    with live_server(app) as base:
        yield base


def outside_write(engine: Engine) -> None:
    """A write State Hub's process never sees (psql, another worker)."""
    with Database(engine).write() as session:
        session.execute(
            insert(AgentMessage),
            [{**_message(), "id": uuid.uuid4(), "kind": "message",
              "created_at": SystemClock().now()}],
        )  # fmt: skip


def _head(base: str) -> str:
    return str(httpx.get(f"{base}/messages/feed", params={"after": "v1:0"}).json()["high_water"])


def _later(delay: float, action: Any) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        action()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_parked_reader_returns_as_soon_as_a_message_is_sent(hub: str) -> None:
    head = _head(hub)
    writer = _later(0.3, lambda: httpx.post(f"{hub}/messages/", json=_message()))

    started = time.monotonic()
    page = httpx.get(f"{hub}/messages/feed", params={"after": head, "wait": 20}, timeout=30).json()
    elapsed = time.monotonic() - started
    writer.join()

    assert [c["entity"] for c in page["changes"]] == ["message"]
    assert 0.25 < elapsed < 5


def test_an_outside_write_wakes_a_parked_reader(hub: str, database_url: str) -> None:
    """A write State Hub's process never sees (psql, another worker) still wakes."""
    head = _head(hub)
    engine = make_engine(database_url)
    writer = _later(0.3, lambda: outside_write(engine))
    started = time.monotonic()
    page = httpx.get(f"{hub}/messages/feed", params={"after": head, "wait": 20}, timeout=30).json()
    writer.join()
    engine.dispose()

    assert len(page["changes"]) == 1
    assert time.monotonic() - started < 5


def test_an_idle_wait_ends_with_a_heartbeat(hub: str) -> None:
    head = _head(hub)
    started = time.monotonic()
    page = httpx.get(f"{hub}/messages/feed", params={"after": head, "wait": 0.5}, timeout=30).json()

    assert page["changes"] == []
    assert page["next_cursor"] == head
    assert 0.45 < time.monotonic() - started < 5


def test_wait_is_clamped_to_55_seconds(database_url: str) -> None:
    db = Database(make_engine(database_url))
    clock = FrozenClock()
    feed = FeedService(db, clock, "lp")
    observed: list[float] = []

    class RecordingWake(FeedWake):
        async def wait_past(self, generation: int, timeout: float) -> bool:
            observed.append(timeout)
            return False

    asyncio.run(feed.wait_page(RecordingWake(), "v1:0", wait=3600))
    db.engine.dispose()

    assert observed == [55.0]


def test_a_commit_during_the_check_is_not_lost(database_url: str) -> None:
    """The lost-wakeup race, made deterministic: the write commits after the
    reader's (empty) check and before it parks. The reader took the wake
    generation before checking, so it re-reads at once instead of sleeping."""
    db = Database(make_engine(database_url))
    feed = FeedService(db, SystemClock(), "lp")
    wake = FeedWake()
    checks = 0
    original_page = feed.page

    def page_then_commit(*args: Any, **kwargs: Any) -> dict[str, Any]:
        nonlocal checks
        result = original_page(*args, **kwargs)
        checks += 1
        if checks == 1:
            with db.write() as session:
                session.execute(
                    insert(AgentMessage),
                    [{**_message(), "id": uuid.uuid4(), "kind": "message",
                      "created_at": SystemClock().now()}],
                )  # fmt: skip
            loop.call_soon_threadsafe(wake.bump)
        return result

    feed.page = page_then_commit  # type: ignore[method-assign]

    async def read() -> dict[str, Any]:
        return await feed.wait_page(wake, "v1:0", wait=30)

    loop = asyncio.new_event_loop()
    started = time.monotonic()
    page = loop.run_until_complete(read())
    loop.close()
    db.engine.dispose()

    assert len(page["changes"]) == 1
    assert time.monotonic() - started < 5


def test_xid_mode_wakes_by_watermark(pg_server_url: str) -> None:
    with temporary_pg_database(pg_server_url, prefix="agenthub_lpx") as url:
        settings = StateHubSettings(database_url=url, instance_label="lp", revision_mode="xid")
        with live_server(create_app(settings)) as base:
            head = _head(base)
            writer = _later(0.3, lambda: httpx.post(f"{base}/messages/", json=_message()))
            page = httpx.get(
                f"{base}/messages/feed", params={"after": head, "wait": 20}, timeout=30
            ).json()
            writer.join()

    assert len(page["changes"]) == 1
