"""Named mutual-exclusion locks for check→act→record sequences that must not interleave
(the seed §4 job-quota sequence). In-process by default; with the Redis bus they are Redis
locks, so the sequence is serialized across workers too. Failing to get the lock in time is
a retryable 503 — never a silent run without it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

import redis
from redis.exceptions import LockError

from agenthub.bucketsync.errors import StorageUnavailable


def _busy(name: str) -> StorageUnavailable:
    return StorageUnavailable(
        f"the {name} lock is busy; nothing was done", hint="retry in a few seconds"
    )


class Locks(Protocol):
    def hold(self, name: str, *, wait_s: float = 30.0) -> AbstractContextManager[None]:
        """Hold lock `name` for the block, waiting up to `wait_s` for it."""
        ...


class LocalLocks:
    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    @contextmanager
    def hold(self, name: str, *, wait_s: float = 30.0) -> Iterator[None]:
        with self._guard:
            lock = self._locks.setdefault(name, threading.Lock())
        if not lock.acquire(timeout=wait_s):
            raise _busy(name)
        try:
            yield
        finally:
            lock.release()


class RedisLocks:
    """Redis locks with a lease (`lease_s`), so a crashed worker cannot hold one forever."""

    def __init__(self, client: redis.Redis, prefix: str, *, lease_s: float = 120.0) -> None:
        self._client = client
        self._prefix = f"{prefix}lock:"
        self._lease_s = lease_s

    @contextmanager
    def hold(self, name: str, *, wait_s: float = 30.0) -> Iterator[None]:
        lock = self._client.lock(
            self._prefix + name, timeout=self._lease_s, blocking_timeout=wait_s
        )
        try:
            acquired = lock.acquire()
        except redis.RedisError as exc:
            raise StorageUnavailable(
                f"the lock store (Redis) is unavailable: {exc}", hint="retry in a few seconds"
            ) from exc
        if not acquired:
            raise _busy(name)
        try:
            yield
        finally:
            # LockError: the lease expired first and the next holder already owns it.
            with contextlib.suppress(LockError):
                lock.release()
