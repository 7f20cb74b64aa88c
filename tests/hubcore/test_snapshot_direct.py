"""A snapshot into an empty projection (or after a 410) is loaded straight into the
projection, in one transaction held from before the first page until the checks pass.

Nothing is staged on that path, so what keeps a crash, a refusal or a cancellation from
leaving half an image is that one transaction alone: each test ends one part-way and
finds the projection as it was. The broken variant (the load committing per page)
shows what the transaction is for."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from agenthub.hubcore.errors import FeedRefused
from agenthub.hubcore.feed_snapshot import SnapshotImporter
from agenthub.hubcore.feedclient import FeedSource, HttpFeedSource
from agenthub.hubcore.models import SourceCursor, StagedSnapshotRow
from agenthub.hubcore.staged_swap import ProjectionLoader
from agenthub.hubcore.store import Database
from agenthub.statehub.app import create_app as create_statehub
from agenthub.statehub.settings import StateHubSettings
from tests.hubcore.follow_support import catch_up, follower, hubcore_image, send, statehub_image
from tests.hubcore.test_snapshot_swap import indexes
from tests.support.servers import live_server

EMPTY: tuple[dict[str, Any], dict[str, Any], dict[str, Any]] = ({}, {}, {})


@pytest.fixture
def statehub(statehub_url: str) -> Iterator[tuple[str, httpx.Client]]:
    app = create_statehub(StateHubSettings(database_url=statehub_url, instance_label="hub-direct"))
    with live_server(app) as base, httpx.Client(base_url=base) as client:
        yield base, client


def _fill(client: httpx.Client, n: int = 7) -> None:
    for i in range(n):
        send(client, subject=f"message {i}", to="*" if i % 3 == 0 else "operator")


def _never_staged(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: Any) -> None:
        raise AssertionError("the direct path staged a page")

    monkeypatch.setattr(SnapshotImporter, "_stage", refuse)


def _cursor(db: Database) -> SourceCursor | None:
    with db.read_only() as session:
        return session.scalars(select(SourceCursor)).first()


def _staged(db: Database) -> int:
    with db.read_only() as session:
        return int(session.scalar(select(func.count()).select_from(StagedSnapshotRow)) or 0)


class _DiesOnPage(HttpFeedSource):
    """State Hub's snapshot over HTTP, with page `dies_on` (1-based) failing."""

    def __init__(self, base: str, dies_on: int, error: BaseException) -> None:
        super().__init__(base)
        self.dies_on, self.error, self.served = dies_on, error, 0

    async def snapshot_page(self, *, page_size: int, token: str | None) -> dict[str, Any]:
        self.served += 1
        if self.served == self.dies_on:
            raise self.error
        return await super().snapshot_page(page_size=page_size, token=token)


def _run(importer: SnapshotImporter, source: FeedSource, *, gone: bool = False) -> Any:
    async def run() -> Any:
        try:
            return await importer.run(source, gone=gone)
        finally:
            await source.aclose()

    return asyncio.run(run())


def _die_before_commit(db: Database, base: str, *, gone: bool = False) -> None:
    """An import killed after its checks passed, just before its commit."""

    def crash() -> None:
        raise KeyboardInterrupt("killed before the load committed")

    dying = follower(db, base)
    dying.importer.before_swap_commit = crash
    with pytest.raises(KeyboardInterrupt):
        _run(dying.importer, dying.source, gone=gone)


def test_a_first_import_loads_the_image_without_staging_it(
    hubcore_db: Database, statehub: tuple[str, httpx.Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, client = statehub
    _fill(client)
    _never_staged(monkeypatch)
    before = indexes(hubcore_db)
    catch_up(follower(hubcore_db, base))
    assert hubcore_image(hubcore_db) == statehub_image(client)
    assert indexes(hubcore_db) == before
    assert _cursor(hubcore_db) is not None


def test_a_crash_before_the_first_import_commits_leaves_the_projection_empty(
    hubcore_db: Database, statehub: tuple[str, httpx.Client]
) -> None:
    base, client = statehub
    _fill(client)
    before = indexes(hubcore_db)
    _die_before_commit(hubcore_db, base)
    assert hubcore_image(hubcore_db) == EMPTY
    assert _cursor(hubcore_db) is None
    assert indexes(hubcore_db) == before
    catch_up(follower(hubcore_db, base))
    assert hubcore_image(hubcore_db) == statehub_image(client)


def test_a_page_lost_part_way_leaves_nothing_of_the_pages_before_it(
    hubcore_db: Database, statehub: tuple[str, httpx.Client]
) -> None:
    base, client = statehub
    _fill(client, 12)
    importer = follower(hubcore_db, base).importer  # 4 rows a page: the third page fails
    lost = httpx.ReadError("connection reset by peer")
    with pytest.raises(httpx.ReadError):
        _run(importer, _DiesOnPage(base, 3, lost))
    assert hubcore_image(hubcore_db) == EMPTY
    assert _cursor(hubcore_db) is None


def test_the_broken_variant_committing_per_page_leaves_half_an_image(
    hubcore_db: Database, statehub: tuple[str, httpx.Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the one transaction is for: a load that commits as it goes keeps the pages
    before a failure (the assertion the test above makes would fail)."""
    base, client = statehub
    _fill(client, 12)
    flush = ProjectionLoader.flush

    def flush_and_commit(self: ProjectionLoader) -> None:
        flush(self)
        self.session.connection().connection.driver_connection.commit()  # type: ignore[union-attr]

    monkeypatch.setattr(ProjectionLoader, "flush", flush_and_commit)
    monkeypatch.setattr("agenthub.hubcore.staged_swap.LOAD_BATCH", 1)
    importer = follower(hubcore_db, base).importer
    with pytest.raises(httpx.ReadError):
        _run(importer, _DiesOnPage(base, 3, httpx.ReadError("reset")))
    assert hubcore_image(hubcore_db)[0], "the broken variant should have kept rows"


def test_a_snapshot_that_does_not_hash_to_its_declared_hash_is_refused_whole(
    hubcore_db: Database, statehub: tuple[str, httpx.Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, client = statehub
    _fill(client)

    class _Altering(HttpFeedSource):
        async def snapshot_page(self, *, page_size: int, token: str | None) -> dict[str, Any]:
            page = await super().snapshot_page(page_size=page_size, token=token)
            for row in page["rows"]:
                if row["part"] == "messages":
                    row["state"]["body"] += " (altered in transit)"
            return page

    importer = follower(hubcore_db, base).importer
    with pytest.raises(FeedRefused) as refused:
        _run(importer, _Altering(base))
    assert refused.value.code == "snapshot_mismatch"
    assert hubcore_image(hubcore_db) == EMPTY
    assert _cursor(hubcore_db) is None


def test_a_410_replaces_the_copy_directly_and_a_crash_keeps_the_old_one(
    hubcore_db: Database, statehub: tuple[str, httpx.Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, client = statehub
    _fill(client)
    catch_up(follower(hubcore_db, base))
    old = hubcore_image(hubcore_db)
    send(client, subject="arrives with the new image")
    _never_staged(monkeypatch)
    _die_before_commit(hubcore_db, base, gone=True)
    assert hubcore_image(hubcore_db) == old
    survivor = follower(hubcore_db, base)
    _run(survivor.importer, survivor.source, gone=True)
    assert hubcore_image(hubcore_db) == statehub_image(client)


def test_a_cancelled_import_is_rolled_back_before_run_returns(
    hubcore_db: Database, statehub: tuple[str, httpx.Client]
) -> None:
    base, client = statehub
    _fill(client, 12)
    second_page_asked = asyncio.Event()

    class _Stalls(HttpFeedSource):
        served = 0

        async def snapshot_page(self, *, page_size: int, token: str | None) -> dict[str, Any]:
            self.served += 1
            if self.served >= 2:
                second_page_asked.set()
                await asyncio.Event().wait()  # State Hub never answers
            return await super().snapshot_page(page_size=page_size, token=token)

    importer = follower(hubcore_db, base).importer

    async def run() -> None:
        source = _Stalls(base)
        task = asyncio.create_task(importer.run(source))
        await asyncio.wait_for(second_page_asked.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await source.aclose()

    asyncio.run(asyncio.wait_for(run(), 30))
    assert hubcore_image(hubcore_db) == EMPTY
    assert _staged(hubcore_db) == 0
    # The transaction is gone, not left open on a thread: a new import gets the lock.
    catch_up(follower(hubcore_db, base))
    assert hubcore_image(hubcore_db) == statehub_image(client)
