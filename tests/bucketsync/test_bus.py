"""The Redis bus (bucketsync.md "Scaling out"): two app instances sharing one data
directory and one Redis behave as one service — wakes, reads, limits and dedup."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.cli import app as cli_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.base import FileEntry
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import ORG, World, make_settings
from tests.bucketsync.live_support import wait_for
from tests.support.redisdb import drop_prefix, require_redis, unique_prefix

pytestmark = pytest.mark.redis


@dataclass
class Pair:
    a: World
    b: World
    pool: ThreadPoolExecutor


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    url = require_redis()
    prefix = unique_prefix()
    clock = FrozenClock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
    settings = make_settings(
        tmp_path / "data", BUCKETSYNC_BUS_URL=url, BUCKETSYNC_BUS_PREFIX=prefix
    )
    worlds = []
    clients = []
    for _ in range(2):
        identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
        app = create_app(
            settings,
            store=LocalBucketStore(settings.data_dir),
            identity=identity,
            clock=clock,  # one frozen instant: both workers stamp the same millisecond
        )
        client = TestClient(app)
        client.__enter__()
        clients.append(client)
        worlds.append(World(client, app.state.hub, identity))
    # One set of users (one users.json) serves both instances.
    worlds[1].tokens = worlds[0].tokens
    pool = ThreadPoolExecutor(max_workers=4)
    try:
        yield Pair(worlds[0], worlds[1], pool)
    finally:
        pool.shutdown(wait=True)
        for client in clients:
            client.__exit__(None, None, None)
        drop_prefix(url, prefix)


def _share_owners(pair: Pair) -> None:
    pair.b._owner = pair.a._owner


def test_bs_13_33_a_post_on_one_worker_wakes_a_waiter_on_the_other(pair: Pair) -> None:
    pair.a.agent("agent-1")
    pair.a.agent("agent-2")
    # Registered through A: B learns of it through the folder-changed event, not the TTL.
    wait_for(lambda: pair.b.client.get("/v1/agents/agent-2").status_code == 200)
    registry = pair.b.hub.longpoll.registry  # type: ignore[union-attr]
    parked = pair.pool.submit(pair.b.client.get, "/v1/inbox/agent-2?wait=20&expand=true")
    wait_for(lambda: registry.stats()["parked"] == 1)
    sent = pair.a.raw("agent-1", "across workers @agent-2").json()
    page: Any = parked.result(timeout=10).json()
    assert page["watch"]["status"] == "delivered"
    assert [i["filename"] for i in page["items"]] == [sent["filename"]]
    assert page["watch"]["waited_ms"] < 5_000


def test_bs_13_33_raw_message_limits_hold_across_workers(pair: Pair) -> None:
    pair.a.agent("agent-1")
    statuses = [
        (pair.a if i % 2 == 0 else pair.b).raw("agent-1", f"n{i}").status_code for i in range(6)
    ]
    assert statuses == [201] * 5 + [429]


def test_bs_13_33_promotion_dedup_holds_across_workers(pair: Pair) -> None:
    pair.a.agent("agent-1")
    _share_owners(pair)
    first = pair.a.promote("agent-1", "m.md", "the same bytes")
    again = pair.b.client.post("/v1/messages", json={"source": pair.a.uri("agent-1", "m.md")})
    assert first.status_code == 201
    assert again.status_code == 409
    assert again.json()["error"]["filename"] == first.json()["filename"]


def test_bs_13_33_more_than_one_worker_needs_a_bus(tmp_path: Path) -> None:
    env = {
        "ORG": ORG,
        "COLLAB_SLUG": "chal",
        "AUDIT_BUCKET": "acme-admin/chal-audit",
        "BUCKETSYNC_DATA_DIR": str(tmp_path / "data"),
    }
    result = CliRunner().invoke(cli_app, ["serve", "--workers", "2"], env=env)
    assert result.exit_code == 2
    assert "BUCKETSYNC_BUS_URL" in result.output and "wake" in result.output


def test_bs_13_33_an_unreachable_bus_fails_start_up_loudly(tmp_path: Path) -> None:
    from agenthub.bucketsync.errors import StorageUnavailable

    settings = make_settings(tmp_path / "data", BUCKETSYNC_BUS_URL="redis://127.0.0.1:1/0")
    with pytest.raises(StorageUnavailable) as failure, TestClient(create_app(settings)):
        pass
    assert "BUCKETSYNC_BUS_URL" in failure.value.message
    assert failure.value.hint is not None and "unset" in failure.value.hint


def test_bs_13_33_rate_limited_across_workers_carries_retry_after(pair: Pair) -> None:
    pair.a.agent("agent-1")
    for i in range(5):
        assert pair.a.raw("agent-1", f"n{i}").status_code == 201
    refused = pair.b.raw("agent-1", "one too many")
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["Retry-After"]) <= 60


def test_bs_12_13_two_workers_never_issue_one_author_the_same_stamp() -> None:
    import redis

    from agenthub.bucketsync.core.stamps import StampIssuer
    from agenthub.bucketsync.scaleout.state import RedisStampClaims

    url = require_redis()
    prefix = unique_prefix()
    clock = FrozenClock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
    try:
        alone = [StampIssuer(clock), StampIssuer(clock)]
        # Without a shared claim, two processes in one millisecond collide (the broken case).
        assert alone[0].issue("agent-1") == alone[1].issue("agent-1")
        claims = RedisStampClaims(redis.Redis.from_url(url), prefix)
        workers = [StampIssuer(clock), StampIssuer(clock)]
        for issuer in workers:
            issuer.shared_claim = claims.claim
        stamps = [issuer.issue("agent-1") for issuer in workers]
        assert stamps[0] != stamps[1]
        assert workers[0].issue("agent-2") != workers[1].issue("agent-2")
    finally:
        drop_prefix(url, prefix)


def _contend(make: Any) -> None:
    """Worker 1 holds the lock; worker 2 cannot get it until worker 1 lets go."""
    from agenthub.bucketsync.errors import StorageUnavailable

    first, second = make(), make()
    with first.hold("job-quota"):
        with pytest.raises(StorageUnavailable) as busy, second.hold("job-quota", wait_s=0.2):
            pass
        assert "busy" in busy.value.message
        with second.hold("other", wait_s=0.2):
            pass  # other names are independent
    with second.hold("job-quota", wait_s=0.2):
        pass


def test_bs_13_33_the_quota_lock_is_exclusive_across_workers() -> None:
    import redis

    from agenthub.bucketsync.scaleout.state import RedisLocks

    url = require_redis()
    prefix = unique_prefix()
    try:
        _contend(lambda: RedisLocks(redis.Redis.from_url(url), prefix))
    finally:
        drop_prefix(url, prefix)


def test_bs_13_33_the_in_process_lock_serializes_threads() -> None:
    from agenthub.bucketsync.core.locks import LocalLocks

    shared = LocalLocks()
    _contend(lambda: shared)


def test_bs_13_33_an_invalidation_during_a_listing_is_not_lost(tmp_path: Path) -> None:
    """Another worker's write announced while this worker is mid-listing must still force
    the next read to re-list (the listing may predate the write)."""
    import threading
    import time

    from agenthub.bucketsync.core.readmodel import ReadModel

    store = LocalBucketStore(tmp_path / "data")
    store.create("acme/chal-main-bucket", creator="bucket-sync")
    listing_started, release = threading.Event(), threading.Event()
    original = store.list

    def slow_list(bucket: str, prefix: str = "", *, recursive: bool = False) -> list[FileEntry]:
        listed = original(bucket, prefix, recursive=recursive)
        listing_started.set()
        release.wait(5)
        return listed

    store.list = slow_list  # type: ignore[method-assign]
    model = ReadModel(
        store, "acme/chal-main-bucket", FrozenClock(), ttl_s=30, content_cache_max_bytes=1 << 20
    )
    reader = threading.Thread(target=model.entries, args=("message_board/",))
    reader.start()
    assert listing_started.wait(5)
    started = time.monotonic()
    model.invalidate("message_board/")  # must not block on the listing in progress
    assert time.monotonic() - started < 1.0
    release.set()
    reader.join(5)
    before = model.listings
    model.entries("message_board/")
    assert model.listings == before + 1
    model.entries("message_board/")
    assert model.listings == before + 1  # and only once


def test_bs_13_33_readers_during_a_post_invalidation_relisting_never_get_the_old_listing(
    tmp_path: Path,
) -> None:
    """The lost cross-worker wake found by the benchmark: while one thread re-lists after an
    invalidation, another thread's read must wait for that listing, not reuse the old one."""
    import threading
    import time

    from agenthub.bucketsync.core.readmodel import ReadModel
    from agenthub.bucketsync.storage.base import Batch

    bucket = "acme/chal-main-bucket"
    store = LocalBucketStore(tmp_path / "data")
    store.create(bucket, creator="bucket-sync")
    model = ReadModel(store, bucket, FrozenClock(), ttl_s=30, content_cache_max_bytes=1 << 20)
    assert model.entries("broadcasts/") == {}
    store.write_batch(bucket, Batch(adds=[("broadcasts/20260301-120000-000_x.md", b"hi")]))
    model.invalidate("broadcasts/")  # worker A's folder-changed event

    listing, release = threading.Event(), threading.Event()
    original = store.list

    def slow_list(bucket: str, prefix: str = "", *, recursive: bool = False) -> list[FileEntry]:
        listed = original(bucket, prefix, recursive=recursive)
        listing.set()
        release.wait(5)
        return listed

    store.list = slow_list  # type: ignore[method-assign]
    first = ThreadPoolExecutor(max_workers=2)
    relisting = first.submit(model.entries, "broadcasts/")
    assert listing.wait(5)
    racing = first.submit(model.entries, "broadcasts/")
    time.sleep(0.3)  # every chance for a wrong fast path to answer with the old listing
    release.set()
    assert "broadcasts/20260301-120000-000_x.md" in racing.result(timeout=5)
    assert "broadcasts/20260301-120000-000_x.md" in relisting.result(timeout=5)
    first.shutdown()
