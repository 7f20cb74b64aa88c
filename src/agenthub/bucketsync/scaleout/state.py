"""Redis adapters for the state that must hold across workers: the rate limiters (through
`limits`' Redis storage, moving windows) the promoted-hash dedup, the stamp claims, the
named locks and the idempotency gate. All fail closed (503) when Redis is unreachable: a
limit that silently stops holding is worse than a retry.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import redis
from limits import RateLimitItemPerSecond
from limits.errors import StorageError
from limits.storage import RedisStorage
from limits.strategies import MovingWindowRateLimiter
from redis.exceptions import LockError
from redis.lock import Lock

from agenthub.bucketsync.core.dedup import PromotionDedup
from agenthub.bucketsync.core.limiter import Quota, Rate, report
from agenthub.bucketsync.core.locks import FileFences, Lease, StaleLease, busy
from agenthub.bucketsync.errors import AlreadyPromoted, RateLimited, StorageUnavailable
from agenthub.pids import Holder

# A promotion in flight holds its key this long at most (a crashed worker frees it).
_PENDING_TTL_S = 120
# Promoted hashes are remembered for a week: the in-memory LRU's role, bounded by time.
_PROMOTED_TTL_S = 7 * 24 * 3600

T = TypeVar("T")


def _unavailable(exc: Exception) -> StorageUnavailable:
    return StorageUnavailable(
        f"the shared limiter/dedup store (Redis) is unavailable: {exc}",
        hint="retry in a few seconds",
    )


class RedisLimiter:
    """The `CompoundLimiter` contract (`acquire(key)`) over moving windows in Redis."""

    def __init__(self, name: str, rates: list[Rate], storage: RedisStorage) -> None:
        self.name = name
        self._items = [
            RateLimitItemPerSecond(rate.capacity, int(rate.period_s), namespace=name)
            for rate in rates
        ]
        self._limiter = MovingWindowRateLimiter(storage)

    def acquire(self, key: str) -> None:
        """Take one hit from every window or raise `RateLimited` with Retry-After. All
        windows are tested before any is hit, so a rejection costs no window a hit
        (BS-5.9); two workers racing past the test may overshoot by one."""
        try:
            for item in self._items:
                if not self._limiter.test(item, key):
                    stats = self._limiter.get_window_stats(item, key)
                    wait = max(0.0, stats.reset_time - time.time())
                    report([Quota(item.amount, 0, wait)])
                    raise RateLimited(
                        f"{self.name} rate limit reached for {key}",
                        retry_after_s=wait,
                        hint=f"retry after {max(1, round(wait + 0.5))} s",
                    )
            for item in self._items:
                self._limiter.hit(item, key)
            now = time.time()
            standing = [(item, self._limiter.get_window_stats(item, key)) for item in self._items]
            report(
                [
                    Quota(item.amount, stats.remaining, max(0.0, stats.reset_time - now))
                    for item, stats in standing
                ]
            )
        except (StorageError, redis.RedisError) as exc:
            raise _unavailable(exc) from exc


class RedisDedup:
    """`PromotionDedup.claim` with the claims in Redis: `SET NX` reserves the key for the
    duration of the write, then it holds the filename the promotion became."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self._client = client
        self._prefix = f"{prefix}dedup:"

    @contextmanager
    def claim(self, data: bytes, folder: str) -> Iterator[list[str]]:
        key = self._prefix + PromotionDedup.key(data, folder)
        try:
            reserved = self._client.set(key, "", nx=True, ex=_PENDING_TTL_S)
            existing = None if reserved else self._client.get(key)
        except redis.RedisError as exc:
            raise _unavailable(exc) from exc
        if not reserved:
            filename = existing.decode() if isinstance(existing, bytes) else ""
            if not filename:
                raise AlreadyPromoted(
                    "the same source is being promoted right now",
                    filename="",
                    hint="retry in a moment to get the filename",
                )
            raise AlreadyPromoted(
                f"this source was already promoted as {filename}",
                filename=filename,
                hint=f"existing filename: {filename}",
            )
        result: list[str] = []
        try:
            yield result
        except BaseException:
            self._release(key)
            raise
        if result:
            # The write is committed; a failure here only weakens a later duplicate check.
            with contextlib.suppress(redis.RedisError):
                self._client.set(key, result[0], ex=_PROMOTED_TTL_S)
        else:
            self._release(key)

    def _release(self, key: str) -> None:
        with contextlib.suppress(redis.RedisError):  # else it expires after _PENDING_TTL_S
            self._client.delete(key)


class RedisStampClaims:
    """Per-author stamps unique across workers: `SET NX` on (author, stamp), kept long
    enough to outlive any listing-cache lag (BS-12.13)."""

    TTL_S = 600

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self._client = client
        self._prefix = f"{prefix}stamp:"

    def claim(self, author: str, stamp: str) -> bool:
        try:
            return bool(
                self._client.set(f"{self._prefix}{author}:{stamp}", "1", nx=True, ex=self.TTL_S)
            )
        except redis.RedisError as exc:
            raise _unavailable(exc) from exc


class RedisLocks:
    """Redis locks with a lease (`lease_s`), so a crashed worker cannot hold one forever,
    and a fencing token per acquisition (`INCR` of `{prefix}fence:{name}`); `fences`, when
    the store is a directory on this machine, refuses a stale token's write atomically with
    it (`core.locks` explains the whole guarantee)."""

    def __init__(
        self,
        client: redis.Redis,
        prefix: str,
        *,
        lease_s: float = 120.0,
        fences: FileFences | None = None,
    ) -> None:
        self._client = client
        self._prefix = f"{prefix}lock:"
        self._fence_prefix = f"{prefix}fence:"
        self.lease_s = lease_s
        self._fences = fences

    @contextmanager
    def hold(self, name: str, *, wait_s: float = 30.0) -> Iterator[Lease]:
        lock = self._client.lock(self._prefix + name, timeout=self.lease_s, blocking_timeout=wait_s)
        try:
            acquired = lock.acquire()
            token = _count(self._client.incr(self._fence_prefix + name)) if acquired else 0
        except redis.RedisError as exc:
            raise _lock_store_unavailable(exc) from exc
        if not acquired:
            raise busy(name)
        try:
            lease = RedisLease(name, token, lock, self._fences)
            if self._fences is not None:
                self._fences.claim(name, token)
            yield lease
        finally:
            # LockError: the lease expired first and the next holder already owns it.
            with contextlib.suppress(LockError, redis.RedisError):
                lock.release()


class RedisLease:
    """One holding of a `RedisLocks` lock (the `core.locks.Lease` port)."""

    def __init__(self, name: str, token: int, lock: Lock, fences: FileFences | None) -> None:
        self.name = name
        self.token = token
        self._lock = lock
        self._fences = fences

    def renew(self) -> None:
        try:
            self._lock.reacquire()  # a full lease from now, if this holder still owns it
        except LockError as exc:  # LockNotOwnedError: the lease expired, another holds it
            raise StaleLease(self.name, self.token) from exc
        except redis.RedisError as exc:
            raise _lock_store_unavailable(exc) from exc

    def write(self, write: Callable[[], T]) -> T:
        self.renew()
        if self._fences is None:
            return write()  # bounded: a Hub call's deadline is shorter than the lease
        with self._fences.admit(self.name, self.token):
            return write()


def _lock_store_unavailable(exc: Exception) -> StorageUnavailable:
    return StorageUnavailable(
        f"the lock store (Redis) is unavailable: {exc}", hint="retry in a few seconds"
    )


# KEYS: the gate; ARGV: the holder seen, the new holder, the lease. Replaces one holder only.
_TAKE_OVER = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
end
return false
"""
# KEYS: the gate; ARGV: the holder. Frees the gate only if that holder still holds it.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class RedisGate:
    """The idempotency `RunningGate` across workers: `SET NX` of the holder's identity
    (`pids.Holder`: machine, pid and the process's start time) with a lease, polled.

    A gate whose holder is known to have ended (same machine, process gone) is not waited
    out: `recover` (the journal's recovery, wired by the app) first records the answer the
    dead holder may have left, then the gate is taken over, so the waiting duplicate replays
    that answer or, if nothing landed, runs. A live holder is never taken over, however slow
    its request: only a process that is gone, or the lease (a holder on another machine,
    which cannot be checked from here), frees a gate."""

    LEASE_S = 120
    POLL_S = 0.05

    @property
    def lease_s(self) -> float:
        return float(self.LEASE_S)

    def __init__(
        self,
        client: redis.Redis,
        prefix: str,
        *,
        holder: Holder | None = None,
        recover: Callable[[], object] | None = None,
    ) -> None:
        self._client = client
        self._prefix = f"{prefix}idempotency:"
        self._holder = str(holder or Holder.me())
        self.recover = recover
        self._take_over = client.register_script(_TAKE_OVER)
        self._release = client.register_script(_RELEASE)

    def acquire(self, record_id: str, timeout_s: float) -> bool:
        key = self._prefix + record_id
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if self._client.set(key, self._holder, nx=True, ex=self.LEASE_S):
                    return True
                seen = _text(self._client.get(key))
                if seen is not None and self._ended(seen):
                    if self.recover is not None:
                        self.recover()
                    if self._take_over(keys=[key], args=[seen, self._holder, self.LEASE_S]):
                        return True
                    continue
            except redis.RedisError as exc:
                raise _unavailable(exc) from exc
            if time.monotonic() >= deadline:
                return False
            time.sleep(self.POLL_S)

    def release(self, record_id: str) -> None:
        with contextlib.suppress(redis.RedisError):  # else the lease frees it
            self._release(keys=[self._prefix + record_id], args=[self._holder])

    def release_abandoned(self, record_id: str) -> None:
        """Free the gate if its holder has ended (journal recovery answered its request)."""
        key = self._prefix + record_id
        with contextlib.suppress(redis.RedisError):
            seen = _text(self._client.get(key))
            if seen is not None and self._ended(seen):
                self._release(keys=[key], args=[seen])

    @staticmethod
    def _ended(seen: str) -> bool:
        holder = Holder.parse(seen)
        return holder is not None and holder.gone() is True


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value if isinstance(value, str) else None


def _count(value: object) -> int:
    """An integer reply (the sync client's; typed as possibly awaitable)."""
    assert isinstance(value, int)
    return value
