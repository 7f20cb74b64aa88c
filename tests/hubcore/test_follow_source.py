"""The feed source adapters: State Hub's refusals become hub-core errors, and the
in-process source parks like the HTTP long-poll does."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest

from agenthub.clock import SystemClock
from agenthub.db import make_engine
from agenthub.hubcore.errors import ResnapshotRequired, SourceUnavailable
from agenthub.hubcore.feedclient import HttpFeedSource, InProcessFeedSource
from agenthub.statehub import source as statehub_source
from agenthub.statehub.app import create_app as create_statehub
from agenthub.statehub.feed import FeedService
from agenthub.statehub.inbox import InboxService
from agenthub.statehub.schemas import MessageCreate
from agenthub.statehub.settings import StateHubSettings
from agenthub.statehub.snapshot import PagedSnapshots
from agenthub.statehub.store import Database as StateHubDatabase
from tests.support.servers import live_server

ASK = {"limit": 10, "wait": 0.0, "source_instance": None, "source_epoch": None}


@pytest.fixture
def statehub_base(statehub_url: str) -> Iterator[str]:
    with live_server(create_statehub(StateHubSettings(database_url=statehub_url))) as base:
        yield base


def fetch(source: HttpFeedSource, after: str, **kwargs: object) -> None:
    async def run() -> None:
        try:
            await source.page(after, **(ASK | kwargs))  # type: ignore[arg-type]
        finally:
            await source.aclose()

    asyncio.run(run())


def test_a_cursor_ahead_of_the_source_is_a_409_resnapshot(statehub_base: str) -> None:
    with pytest.raises(ResnapshotRequired) as info:
        fetch(HttpFeedSource(statehub_base), "v1:999999")
    assert info.value.gone is False


def test_another_epoch_is_a_409_resnapshot(statehub_base: str) -> None:
    with pytest.raises(ResnapshotRequired):
        fetch(HttpFeedSource(statehub_base), "v1:0", source_epoch="not-this-one")


def test_a_malformed_cursor_is_a_source_error_not_a_resnapshot(statehub_base: str) -> None:
    with pytest.raises(SourceUnavailable) as info:
        fetch(HttpFeedSource(statehub_base), "garbage")
    assert "400" in info.value.message


def test_an_unreachable_state_hub_is_source_unavailable_with_a_hint() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(SourceUnavailable) as info:
        fetch(HttpFeedSource(f"http://127.0.0.1:{port}"), "v1:0")
    assert info.value.hint and "HUBCORE_STATEHUB_URL" in info.value.hint


def test_the_in_process_source_parks_until_a_write_lands(statehub_url: str) -> None:
    engine = make_engine(statehub_url)
    db = StateHubDatabase(engine)
    statehub_source.prepare(db, "lock")
    feed = FeedService(db, SystemClock(), "in-process")
    source = InProcessFeedSource(feed, PagedSnapshots(feed))
    inbox = InboxService(db, SystemClock())

    async def run() -> tuple[int, float]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        waiting = asyncio.create_task(source.page("v1:0", **(ASK | {"wait": 5.0})))  # type: ignore[arg-type]
        await asyncio.sleep(0.2)
        assert not waiting.done()
        message = MessageCreate(from_agent="a", to_agent="b", subject="s", body="b")
        await asyncio.to_thread(inbox.send, message)
        page = await asyncio.wait_for(waiting, timeout=5)
        return len(page["changes"]), loop.time() - started

    try:
        changes, elapsed = asyncio.run(run())
    finally:
        engine.dispose()
    assert changes == 1 and elapsed < 2
