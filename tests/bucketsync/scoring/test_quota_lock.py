"""The quota lock across workers (BS-4.44 with BUCKETSYNC_BUS_URL): two JobQuota instances
standing in for two worker processes share the audit-bucket ledger and a real Redis lock."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis

from agenthub.bucketsync.errors import QuotaBackendUnavailable, RateLimited
from agenthub.bucketsync.scaleout.state import RedisLocks
from agenthub.bucketsync.scoring.quota import JobQuota, NamedQuotaLock, QuotaLedger
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.support.redisdb import require_redis

AUDIT = "acme-admin/chal-audit"


def worker(store: LocalBucketStore, lock: NamedQuotaLock, clock: FrozenClock) -> JobQuota:
    return JobQuota(
        QuotaLedger(store, AUDIT, "quota/job_ledger.jsonl"),
        lock,
        clock,
        per_agent=10,
        per_user=30,
    )


@pytest.mark.redis
def test_bs_4_44_redis_lock_holds_the_quota_across_workers(tmp_path: Path) -> None:
    url = require_redis()
    prefix = f"agenthub-test:{uuid.uuid4().hex}:"
    clock = FrozenClock(datetime(2026, 3, 1, tzinfo=UTC))
    store = LocalBucketStore(tmp_path)
    store.create(AUDIT, creator="bucket-sync", private=True)
    workers = [
        worker(store, NamedQuotaLock(lambda: RedisLocks(redis.Redis.from_url(url), prefix)), clock)
        for _ in range(2)
    ]
    started: list[str] = []
    guard = threading.Lock()

    def start() -> tuple[str, str]:
        threading.Event().wait(0.02)  # a launch takes time: the window a race needs
        job_id = uuid.uuid4().hex
        with guard:
            started.append(job_id)
        return job_id, job_id

    def attempt(i: int) -> str:
        try:
            workers[i % 2].launch("agent-1", "alice", start)
            return "launched"
        except RateLimited:
            return "refused"

    with ThreadPoolExecutor(20) as pool:
        outcomes = list(pool.map(attempt, range(20)))
    assert outcomes.count("launched") == 10 and len(started) == 10
    assert len(QuotaLedger(store, AUDIT, "quota/job_ledger.jsonl").rows()) == 10


def test_bs_4_45_unreachable_lock_backend_fails_closed(tmp_path: Path) -> None:
    store = LocalBucketStore(tmp_path)
    store.create(AUDIT, creator="bucket-sync", private=True)
    unreachable = RedisLocks(redis.Redis.from_url("redis://127.0.0.1:1/0"), "never:")
    lock = NamedQuotaLock(lambda: unreachable)
    quota = worker(store, lock, FrozenClock())
    launched: list[str] = []

    def launch() -> tuple[str, None]:
        launched.append("x")
        return "id", None

    with pytest.raises(QuotaBackendUnavailable):
        quota.launch("agent-1", "alice", launch)
    assert launched == []
