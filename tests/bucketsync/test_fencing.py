"""Fencing tokens on the named locks (`core.locks`): a holder paused past its Redis lease
(a tiny lease stands in for a long pause) cannot overwrite what the next holder wrote, and
the broken variant — the same read-modify-write without the token check — loses the next
holder's verdict."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from agenthub.bucketsync.core.locks import FileFences, Lease, StaleLease, Unfenced
from agenthub.bucketsync.scaleout.state import RedisLocks
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from tests.support.redisdb import drop_prefix, require_redis, unique_prefix

pytestmark = pytest.mark.redis

BUCKET = "acme/chal-main-bucket"
INDEX = "results/verification_status.json"
LEASE_S = 0.3


@pytest.fixture
def locks(tmp_path: Path) -> Iterator[RedisLocks]:
    url = require_redis()
    prefix = unique_prefix()
    try:
        yield RedisLocks(
            redis.Redis.from_url(url),
            prefix,
            lease_s=LEASE_S,
            fences=FileFences(tmp_path / "locks"),
        )
    finally:
        drop_prefix(url, prefix)


@pytest.fixture
def store(tmp_path: Path) -> LocalBucketStore:
    store = LocalBucketStore(tmp_path / "data")
    store.create(BUCKET, creator="acme")
    return store


def read(store: LocalBucketStore) -> dict[str, str]:
    return dict(json.loads(store.read(BUCKET, INDEX) or b"{}"))


def write(store: LocalBucketStore, index: dict[str, str]) -> None:
    store.write_batch(BUCKET, Batch(adds=[(INDEX, json.dumps(index).encode())]))


def next_holder_commits(locks: RedisLocks, store: LocalBucketStore) -> None:
    """Another worker: takes the lock (once the first lease ends) and commits its verdict."""
    with locks.hold("verification index", wait_s=5) as lease:
        index = read(store)
        lease.write(lambda: write(store, {**index, "b.md": "valid"}))


def paused_holder(locks: RedisLocks, store: LocalBucketStore, lease: Lease) -> dict[str, str]:
    """Read the index, stall past the lease while the next holder commits, then write."""
    index = read(store)
    # The pause: the next holder gets the lock only once this holder's lease has ended.
    started = time.monotonic()
    other = threading.Thread(target=next_holder_commits, args=(locks, store))
    other.start()
    other.join(10)
    assert not other.is_alive() and time.monotonic() - started >= LEASE_S / 2
    lease.write(lambda: write(store, {**index, "a.md": "valid"}))
    return read(store)


def test_a_holder_past_its_lease_cannot_overwrite_the_next_holders_write(
    locks: RedisLocks, store: LocalBucketStore
) -> None:
    with locks.hold("verification index") as lease, pytest.raises(StaleLease) as refused:
        paused_holder(locks, store, lease)
    assert "nothing was written" in refused.value.message
    assert read(store) == {"b.md": "valid"}  # the next holder's verdict stands


def test_the_token_refuses_a_holder_stalled_after_its_renewal(
    locks: RedisLocks, store: LocalBucketStore
) -> None:
    """The renewal alone is a check-then-act: a holder that renewed, then stalled (a GC
    pause, a slow call) before its write, is refused by the token at the write itself."""
    with locks.hold("verification index") as lease:
        lease.renew = lambda: None  # type: ignore[method-assign]  # renewed, then stalled
        with pytest.raises(StaleLease):
            paused_holder(locks, store, lease)
    assert read(store) == {"b.md": "valid"}


def test_without_the_token_check_the_next_holders_verdict_is_lost(
    locks: RedisLocks, store: LocalBucketStore
) -> None:
    """The broken variant: the same sequence with a lease that writes unchecked."""
    with locks.hold("verification index"):
        after = paused_holder(locks, store, Unfenced("verification index"))
    assert after == {"a.md": "valid"}  # b.md's verdict was overwritten


def test_a_holder_within_its_lease_writes_and_tokens_grow(
    locks: RedisLocks, store: LocalBucketStore
) -> None:
    tokens = []
    for name in ("a.md", "b.md"):
        with locks.hold("verification index") as lease:
            index = read(store)
            lease.write(lambda: write(store, {**index, name: "valid"}))  # noqa: B023
            tokens.append(lease.token)
    assert read(store) == {"a.md": "valid", "b.md": "valid"}
    assert tokens[1] > tokens[0]


def test_without_a_file_fence_an_expired_lease_is_refused_at_renewal(
    store: LocalBucketStore,
) -> None:
    """On the Hub (no file fence), the renewal before each write is the check, and the
    lease it renews outlasts a Hub call's deadline."""
    url = require_redis()
    prefix = unique_prefix()
    locks = RedisLocks(redis.Redis.from_url(url), prefix, lease_s=LEASE_S)
    try:
        with locks.hold("verification index") as lease, pytest.raises(StaleLease):
            paused_holder(locks, store, lease)
        assert read(store) == {"b.md": "valid"}
    finally:
        drop_prefix(url, prefix)
