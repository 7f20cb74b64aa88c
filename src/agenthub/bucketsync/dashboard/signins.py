"""Where "Sign in with Hugging Face" keeps its one-use states and its sessions.

    SignIns (port)   put / get / take (one use) / drop of small records with an expiry
    MemorySignIns    this process (one worker)
    RedisSignIns     `scaleout.signins`, chosen when BUCKETSYNC_BUS_URL is set: every
                     worker and host on that Redis shares them, so a sign-in started on one
                     worker may finish on another and the session is valid on all

Keys are a state or a session id; records hold what the flow needs (the next path; the
user and the provider's access token), so the Redis one is as sensitive as the token.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Protocol

from agenthub.clock import Clock

Record = dict[str, str]


class SignIns(Protocol):
    def put(self, kind: str, key: str, record: Record, expires: datetime) -> None:
        """Keep `record` under (`kind`, `key`) until `expires`."""
        ...

    def get(self, kind: str, key: str) -> Record | None:
        """The record, or None when absent or expired."""
        ...

    def take(self, kind: str, key: str) -> Record | None:
        """The record, removed in the same step (only one taker gets it)."""
        ...

    def drop(self, kind: str, key: str) -> None:
        """Forget the record (absent is fine)."""
        ...


class MemorySignIns:
    """Sign-ins in this process; expired records are dropped as they are met."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._records: dict[tuple[str, str], tuple[Record, datetime]] = {}

    def put(self, kind: str, key: str, record: Record, expires: datetime) -> None:
        now = self._clock.now()
        with self._lock:
            self._records = {k: v for k, v in self._records.items() if v[1] > now}
            self._records[(kind, key)] = (dict(record), expires)

    def get(self, kind: str, key: str) -> Record | None:
        with self._lock:
            found = self._records.get((kind, key))
            if found is not None and found[1] <= self._clock.now():
                del self._records[(kind, key)]
                return None
        return None if found is None else dict(found[0])

    def take(self, kind: str, key: str) -> Record | None:
        with self._lock:
            found = self._records.pop((kind, key), None)
        if found is None or found[1] <= self._clock.now():
            return None
        return dict(found[0])

    def drop(self, kind: str, key: str) -> None:
        with self._lock:
            self._records.pop((kind, key), None)
