"""A live page commits without waiting for its WAL flush (PostgreSQL): a crash may lose
that commit, which leaves the rows and the cursor as they were before it, and the
follower then asks again from the stored cursor instead of re-snapshotting."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Connection, delete, event, update

from agenthub.clock import FrozenClock
from agenthub.hubcore.apply import PageApplier
from agenthub.hubcore.errors import FeedRefused
from agenthub.hubcore.models import ProjectedMessage, SourceCursor
from agenthub.hubcore.store import Database
from agenthub.statehub.app import create_app as create_statehub
from agenthub.statehub.settings import StateHubSettings
from tests.hubcore.feedpages import cursor_of, m, page, start_cursor
from tests.hubcore.follow_support import follower, hubcore_image, send, statehub_image
from tests.support.servers import live_server


@pytest.fixture
def statehub(statehub_url: str) -> Iterator[tuple[str, httpx.Client]]:
    app = create_statehub(StateHubSettings(database_url=statehub_url, instance_label="hub-flush"))
    with live_server(app) as base, httpx.Client(base_url=base) as client:
        yield base, client


def test_a_commit_lost_before_its_flush_is_asked_for_again_without_a_resnapshot(
    statehub: tuple[str, httpx.Client], hubcore_db: Database
) -> None:
    base, client = statehub
    send(client, subject="kept")
    f = follower(hubcore_db, base)
    refusals: list[FeedRefused] = []

    async def run() -> None:
        try:
            await f.catch_up()
            kept = cursor_of(hubcore_db)
            lost = send(client, subject="lost")
            await f.catch_up()
            # What a crash losing the last, unflushed commit leaves: the rows and the
            # cursor from before it, while the follower remembers having applied it.
            with hubcore_db.write() as session:
                session.execute(
                    delete(ProjectedMessage).where(ProjectedMessage.id == uuid.UUID(lost))
                )
                session.execute(
                    update(SourceCursor).values(cursor=kept.cursor, high_water=kept.high_water)
                )
            with pytest.raises(FeedRefused) as info:
                await f.step(wait=0)
            refusals.append(info.value)
            await f.catch_up()
        finally:
            await f.source.aclose()

    asyncio.run(run())

    assert [(r.code, r.resnapshot) for r in refusals] == [("out_of_order_page", False)]
    assert hubcore_image(hubcore_db) == statehub_image(client)
    assert f.resnapshots == 1  # the first snapshot only


# PostgreSQL only: SQLite's WAL with synchronous=NORMAL already commits without a flush.
@pytest.mark.parametrize("hubcore_url", ["pg"], indirect=True)
def test_a_live_page_commits_without_waiting_for_the_flush_and_only_that_page(
    hubcore_db: Database,
) -> None:
    start_cursor(hubcore_db)
    seen: list[Any] = []

    def at_commit(conn: Connection) -> None:
        seen.append(conn.exec_driver_sql("SHOW synchronous_commit").scalar())

    event.listen(hubcore_db.engine, "commit", at_commit)
    try:
        PageApplier(hubcore_db, FrozenClock()).apply(page(m(1, 1)))
        with hubcore_db.write() as session:  # any other transaction flushes as before
            session.execute(update(SourceCursor).values(last_error=None))
    finally:
        event.remove(hubcore_db.engine, "commit", at_commit)

    assert seen == ["off", "on"]
