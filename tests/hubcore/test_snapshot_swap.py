"""The snapshot swap rebuilds SQLite's secondary indexes inside its transaction: a swap
leaves them as the migrations defined them, and a swap that fails leaves them too."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import text

from agenthub.hubcore.store import Database
from agenthub.statehub.app import create_app as create_statehub
from agenthub.statehub.settings import StateHubSettings
from tests.hubcore.follow_support import catch_up, follower, hubcore_image, send, statehub_image
from tests.support.servers import live_server


@pytest.fixture
def statehub(statehub_url: str) -> Iterator[tuple[str, httpx.Client]]:
    app = create_statehub(StateHubSettings(database_url=statehub_url, instance_label="hub-swap"))
    with live_server(app) as base, httpx.Client(base_url=base) as client:
        yield base, client


def indexes(db: Database) -> list[tuple[str, str]]:
    """Every index definition of the projection, as the database holds it."""
    with db.read_only() as session:
        if db.sqlite:
            sql = "SELECT name, sql FROM sqlite_master WHERE type = 'index' ORDER BY name"
        else:
            sql = (
                "SELECT indexname, indexdef FROM pg_indexes "
                "WHERE tablename LIKE 'projected_%' ORDER BY indexname"
            )
        return [(str(name), str(definition)) for name, definition in session.execute(text(sql))]


def test_a_swap_keeps_every_index_as_the_migrations_made_it(
    hubcore_db: Database, statehub: tuple[str, httpx.Client]
) -> None:
    base, client = statehub
    before = indexes(hubcore_db)
    assert any("thread_id" in name for name, _ in before)
    for n in range(6):
        send(client, subject=f"message {n}", to="*" if n % 2 else "operator")
    catch_up(follower(hubcore_db, base))
    assert indexes(hubcore_db) == before
    assert hubcore_image(hubcore_db) == statehub_image(client)
    if hubcore_db.sqlite:  # the rebuilt index is the planner's again
        with hubcore_db.read_only() as session:
            plan = session.execute(
                text("EXPLAIN QUERY PLAN SELECT id FROM projected_messages WHERE thread_id = 'x'")
            ).all()
        assert "ix_projected_messages_thread_id" in " ".join(str(row[-1]) for row in plan)


def test_a_swap_that_fails_before_its_commit_leaves_rows_and_indexes(
    hubcore_db: Database, statehub: tuple[str, httpx.Client]
) -> None:
    base, client = statehub
    send(client, subject="first")
    catch_up(follower(hubcore_db, base))
    rows, before = hubcore_image(hubcore_db), indexes(hubcore_db)
    send(client, subject="arrives with the new image")

    def crash() -> None:
        raise KeyboardInterrupt("killed before the swap committed")

    dying = follower(hubcore_db, base)
    dying.importer.before_swap_commit = crash
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(dying.importer.run(dying.source, gone=False))
    assert indexes(hubcore_db) == before
    assert hubcore_image(hubcore_db) == rows
