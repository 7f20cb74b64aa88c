"""`RedisSignIns`: the dashboard's sign-in states and sessions in Redis (the
`dashboard.signins.SignIns` port), so every worker and host on one BUCKETSYNC_BUS_URL
agrees on them. A record expires with its key (`PX`); `take` is GETDEL, one taker only.
Keys are the SHA-256 of the state or session id, so a look at Redis shows no live id.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

import redis

from agenthub.bucketsync.errors import StorageUnavailable
from agenthub.clock import Clock

T = TypeVar("T")


class RedisSignIns:
    def __init__(self, client: redis.Redis, prefix: str, clock: Clock) -> None:
        self._client = client
        self._prefix = prefix
        self._clock = clock

    def _key(self, kind: str, key: str) -> str:
        return f"{self._prefix}signin:{kind}:{hashlib.sha256(key.encode()).hexdigest()}"

    def put(self, kind: str, key: str, record: dict[str, str], expires: datetime) -> None:
        ttl_ms = int((expires - self._clock.now()).total_seconds() * 1000)
        if ttl_ms <= 0:
            return
        self._call(lambda: self._client.set(self._key(kind, key), json.dumps(record), px=ttl_ms))

    def get(self, kind: str, key: str) -> dict[str, str] | None:
        return _record(self._call(lambda: self._client.get(self._key(kind, key))))

    def take(self, kind: str, key: str) -> dict[str, str] | None:
        return _record(self._call(lambda: self._client.getdel(self._key(kind, key))))

    def drop(self, kind: str, key: str) -> None:
        self._call(lambda: self._client.delete(self._key(kind, key)))

    @staticmethod
    def _call(fn: Callable[[], T]) -> T:
        try:
            return fn()
        except redis.RedisError as exc:
            raise StorageUnavailable(
                f"the dashboard's sign-ins (Redis) are unavailable: {exc}",
                hint="retry in a few seconds",
            ) from exc


def _record(raw: object) -> dict[str, str] | None:
    if not isinstance(raw, bytes | str):
        return None
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None
    return {str(k): str(v) for k, v in parsed.items()} if isinstance(parsed, dict) else None
