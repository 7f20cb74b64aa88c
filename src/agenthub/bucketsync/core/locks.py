"""Named mutual-exclusion locks for check→act→record sequences that must not interleave
(the seed §4 job-quota sequence). In-process by default (`LocalLocks`); with the Redis bus
they are Redis locks (`scaleout.state.RedisLocks`), so the sequence is serialized across
workers too. Failing to get the lock in time is a retryable 503 — never a silent run
without it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

from agenthub.bucketsync.deadlines import within
from agenthub.bucketsync.errors import StorageUnavailable


def busy(name: str) -> StorageUnavailable:
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
            raise busy(name)
        try:
            yield
        finally:
            lock.release()


class Leased:
    """`inner` locks whose lease (`lease_s`) bounds every backend call made while one is
    held (`deadlines.within`): a Hub call cannot still run after the lease let the next
    holder in. `margin_s` leaves time to write what the holder computed."""

    def __init__(self, inner: Locks, *, lease_s: float, margin_s: float = 10.0) -> None:
        self._inner = inner
        self._budget_s = max(1.0, lease_s - margin_s)

    @contextmanager
    def hold(self, name: str, *, wait_s: float = 30.0) -> Iterator[None]:
        with self._inner.hold(name, wait_s=wait_s), within(self._budget_s):
            yield
