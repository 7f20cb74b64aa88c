"""The follower against a real State Hub over HTTP: snapshot, follow, 409/410, refusals."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import insert
from typer.testing import CliRunner

from agenthub.cli import app as cli
from agenthub.clock import SystemClock
from agenthub.hubcore.apply import ApplyResult
from agenthub.hubcore.errors import FeedRefused
from agenthub.hubcore.feed_snapshot import SnapshotResult
from agenthub.hubcore.freshness import FreshnessReport
from agenthub.hubcore.models import ProjectedMessage, SourceCursor
from agenthub.hubcore.repository import message_params
from agenthub.hubcore.store import Database
from agenthub.statehub.app import create_app as create_statehub
from agenthub.statehub.settings import StateHubSettings
from tests.hubcore.bundles import message, uid
from tests.hubcore.feedpages import cursor_of
from tests.hubcore.follow_support import (
    age_tombstones,
    catch_up,
    follower,
    hubcore_image,
    ok,
    raw_delete,
    send,
    statehub_image,
    step,
)
from tests.support.servers import live_server


@pytest.fixture
def statehub(statehub_url: str) -> Iterator[tuple[str, httpx.Client]]:
    app = create_statehub(StateHubSettings(database_url=statehub_url, instance_label="hub-live"))
    with live_server(app) as base, httpx.Client(base_url=base) as client:
        yield base, client


def busy_inbox(client: httpx.Client) -> dict[str, str]:
    """Sends, a thread, a broadcast with receipts, an archive and a supersession."""
    ids = {"root": send(client, subject="root")}
    reply = ok(
        client.post(f"/messages/{ids['root']}/reply", json={"from_agent": "operator", "body": "r"})
    )
    ids["reply"] = reply["id"]
    ids["news"] = send(client, to="*", subject="news")
    ok(client.patch(f"/messages/{ids['news']}/read", params={"reader": "bob"}))
    ok(client.post(f"/messages/{ids['news']}/ack", params={"agent": "eve"}))
    ids["v2"] = send(client, to="*", subject="news v2", supersedes_id=ids["news"])
    ok(client.patch(f"/messages/{ids['root']}/archive"))
    return ids


def test_an_empty_projection_is_filled_from_the_paged_snapshot_then_follows(
    hubcore_db: Database, statehub: tuple[str, httpx.Client]
) -> None:
    base, client = statehub
    busy_inbox(client)
    first = step(follower(hubcore_db, base))
    assert isinstance(first, SnapshotResult) and first.messages == 4
    assert hubcore_image(hubcore_db) == statehub_image(client)
    for n in range(7):
        send(client, subject=f"later {n}")
    result = catch_up(follower(hubcore_db, base))
    assert result.checkpoint
    assert hubcore_image(hubcore_db) == statehub_image(client)


def test_following_from_the_start_converges_with_small_pages(
    hubcore_db: Database, statehub: tuple[str, httpx.Client]
) -> None:
    # Snapshot the empty source first, so every row then arrives through feed pages of
    # at most one revision: the root archived after its reply arrives after the reply.
    base, client = statehub
    step(follower(hubcore_db, base))
    busy_inbox(client)
    result = catch_up(follower(hubcore_db, base, limit=1))
    assert result.checkpoint
    assert hubcore_image(hubcore_db) == statehub_image(client)


def test_a_deleted_root_reaches_hub_core_as_a_tombstone_without_its_body(
    hubcore_db: Database, statehub_url: str, statehub: tuple[str, httpx.Client]
) -> None:
    base, client = statehub
    ids = busy_inbox(client)
    catch_up(follower(hubcore_db, base))
    raw_delete(statehub_url, ids["root"])
    # A later read of the reply moves its (nulled) row above the tombstone's revision.
    ok(client.patch(f"/messages/{ids['reply']}/read"))
    catch_up(follower(hubcore_db, base, limit=1))
    messages, _, tombstones = hubcore_image(hubcore_db)
    assert ids["root"] not in messages and ids["root"] in tombstones
    assert messages[ids["reply"]]["thread_id"] is None
    assert hubcore_image(hubcore_db) == statehub_image(client)


def test_a_409_leads_to_a_resnapshot_and_convergence(
    hubcore_db: Database, statehub: tuple[str, httpx.Client]
) -> None:
    base, client = statehub
    busy_inbox(client)
    catch_up(follower(hubcore_db, base))
    real_epoch = cursor_of(hubcore_db).source_epoch
    with hubcore_db.write() as session:  # as after State Hub failed over: another epoch
        cursor = session.get(SourceCursor, "hub-live")
        assert cursor is not None
        cursor.source_epoch = "an-epoch-before-the-failover"
    send(client, subject="after failover")
    f = follower(hubcore_db, base)
    assert isinstance(step(f), SnapshotResult) and f.resnapshots == 1
    assert cursor_of(hubcore_db).source_epoch == real_epoch
    assert hubcore_image(hubcore_db) == statehub_image(client)


def test_a_410_swaps_in_the_new_image_whole(
    hubcore_db: Database, statehub_url: str, statehub: tuple[str, httpx.Client]
) -> None:
    base, client = statehub
    ids = busy_inbox(client)
    catch_up(follower(hubcore_db, base))
    raw_delete(statehub_url, ids["v2"])
    age_tombstones(statehub_url)  # the delete is now beyond the horizon: no tombstone served
    send(client, subject="after the horizon")
    # The literal rule ("absent and not tombstoned => refuse") would refuse this image:
    literal = follower(hubcore_db, base)
    with pytest.raises(FeedRefused) as refused:
        asyncio.run(literal.importer.run(literal.source, gone=False))
    assert refused.value.code == "snapshot_would_drop_rows" and ids["v2"] in refused.value.rows
    # ...but after a 410 the follower swaps the image in whole.
    f = follower(hubcore_db, base)
    assert isinstance(step(f), SnapshotResult)
    assert hubcore_image(hubcore_db) == statehub_image(client)
    assert ids["v2"] not in hubcore_image(hubcore_db)[0]


def test_a_resnapshot_that_would_drop_unexplained_rows_is_refused_and_alerted(
    hubcore_db: Database, statehub: tuple[str, httpx.Client]
) -> None:
    base, client = statehub
    busy_inbox(client)
    catch_up(follower(hubcore_db, base))
    ghost = message(4242, revision=1)
    with hubcore_db.write() as session:  # a row State Hub lost without a tombstone
        session.execute(insert(ProjectedMessage), [message_params(ghost)])
        cursor = session.get(SourceCursor, "hub-live")
        assert cursor is not None
        cursor.source_epoch = "restored-from-backup"
    before = hubcore_image(hubcore_db)
    with pytest.raises(FeedRefused) as refused:
        step(follower(hubcore_db, base))
    assert refused.value.code == "snapshot_would_drop_rows" and refused.value.rows == [uid(4242)]
    assert hubcore_image(hubcore_db) == before
    report = FreshnessReport(hubcore_db, SystemClock(), following=True, max_lag_s=30).health()
    assert report["mode"] == "stale" and "snapshot_would_drop_rows" in report["last_error"]


def test_a_long_poll_delivers_a_write_without_a_poll_interval(
    hubcore_db: Database, statehub: tuple[str, httpx.Client]
) -> None:
    base, client = statehub
    catch_up(follower(hubcore_db, base))
    f = follower(hubcore_db, base, wait_s=10)

    async def run() -> ApplyResult:
        waiting = asyncio.create_task(f.step())
        await asyncio.sleep(0.3)
        await asyncio.to_thread(send, client, subject="wakes the poll")
        result = await asyncio.wait_for(waiting, timeout=5)
        await f.source.aclose()
        assert isinstance(result, ApplyResult)
        return result

    assert asyncio.run(run()).inserted == 1


def test_a_crash_before_the_snapshot_swap_commits_leaves_the_old_copy(
    hubcore_db: Database, statehub: tuple[str, httpx.Client]
) -> None:
    base, client = statehub
    busy_inbox(client)
    catch_up(follower(hubcore_db, base))
    before, cursor_before = hubcore_image(hubcore_db), cursor_of(hubcore_db).cursor
    send(client, subject="arrives with the new image")

    def crash() -> None:
        raise KeyboardInterrupt("killed before the swap committed")

    dying = follower(hubcore_db, base)
    dying.importer.before_swap_commit = crash
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(dying.importer.run(dying.source, gone=False))
    assert hubcore_image(hubcore_db) == before
    assert cursor_of(hubcore_db).cursor == cursor_before
    catch_up(follower(hubcore_db, base))
    assert hubcore_image(hubcore_db) == statehub_image(client)


def test_follow_once_catches_up_from_the_command_line(
    hubcore_url: str, hubcore_db: Database, statehub: tuple[str, httpx.Client]
) -> None:
    base, client = statehub
    busy_inbox(client)
    result = CliRunner().invoke(
        cli,
        ["hubcore", "follow", "--once", "--statehub-url", base],
        env={"HUBCORE_DATABASE_URL": hubcore_url},
    )
    assert result.exit_code == 0, result.output
    assert "caught up at v1:" in result.output
    assert hubcore_image(hubcore_db) == statehub_image(client)


def test_follow_without_a_state_hub_url_says_how_to_give_one(hubcore_url: str) -> None:
    result = CliRunner().invoke(
        cli, ["hubcore", "follow"], env={"HUBCORE_DATABASE_URL": hubcore_url}
    )
    assert result.exit_code == 2 and "HUBCORE_STATEHUB_URL" in result.output


@pytest.mark.parametrize("hubcore_url", ["pg"], indirect=True)  # xid exists on PostgreSQL only
def test_following_a_state_hub_in_xid_revision_mode_converges(
    hubcore_url: str, hubcore_db: Database, statehub_url: str
) -> None:
    settings = StateHubSettings(database_url=statehub_url, instance_label="hub-xid",
                                revision_mode="xid")  # fmt: skip
    with live_server(create_statehub(settings)) as base, httpx.Client(base_url=base) as client:
        busy_inbox(client)
        catch_up(follower(hubcore_db, base))
        for n in range(5):
            send(client, subject=f"xid {n}")
        # Under xid a commit is served once every older transaction in the *cluster* has
        # ended, so another database's open transaction can delay (never drop) the tail:
        # follow until the copy converges, within a bound.
        deadline = time.monotonic() + 20
        while True:
            catch_up(follower(hubcore_db, base, limit=2))
            if hubcore_image(hubcore_db) == statehub_image(client) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert hubcore_image(hubcore_db) == statehub_image(client)
