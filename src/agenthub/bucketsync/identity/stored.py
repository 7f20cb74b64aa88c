"""`StoredUsers`: the users document in the shared store (S3), so every bucket-sync
process on every machine knows the same users and tokens (`LocalIdentity` reads it).

It is `users.json` of the bucket `_bucketsync/identity`: private, created by `_bucketsync`.
Neither name can be a user or an org member (user names have no `_`), so no token reads
or writes it through `/local/buckets`. Edits are compare-and-swap (`ConditionalStore`),
so `users add` on one host and a revoke on another never lose each other's change.

Reads are cached for `ttl_s` (a request's token check costs no store call); a token not
found asks for a read started after it asked (`fresh=True`; concurrent askers share one),
so a user added anywhere is known at once, and a flood of bad tokens keeps one read in
flight. A removed or revoked token keeps working on other hosts for at most `ttl_s`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from agenthub.bucketsync.errors import StorageUnavailable
from agenthub.bucketsync.identity.local import Document
from agenthub.bucketsync.storage.base import ConditionalStore, compare_and_swap
from agenthub.clock import Clock, SystemClock

IDENTITY_BUCKET = "_bucketsync/identity"
IDENTITY_CREATOR = "_bucketsync"
USERS_PATH = "users.json"
TTL_S = 5.0

T = TypeVar("T")


def _parse(data: bytes | None) -> Document:
    if data is None:
        return {"users": {}}
    try:
        parsed = json.loads(data)
    except ValueError as exc:
        raise StorageUnavailable(
            f"{IDENTITY_BUCKET}/{USERS_PATH} is not JSON: {exc}",
            hint="restore it from a backup (docs/deploy.md, S3 backups)",
        ) from exc
    if not isinstance(parsed, dict) or not isinstance(parsed.get("users", {}), dict):
        raise StorageUnavailable(f"{IDENTITY_BUCKET}/{USERS_PATH} is not a users document")
    return parsed


class StoredUsers:
    def __init__(
        self, store: ConditionalStore, *, clock: Clock | None = None, ttl_s: float = TTL_S
    ) -> None:
        self._store = store
        self._clock = clock or SystemClock()
        self._ttl_s = ttl_s
        self.where = f"the shared store ({IDENTITY_BUCKET}/{USERS_PATH})"
        self._lock = threading.Lock()
        self._reading = threading.Lock()
        self._users: dict[str, dict[str, str | None]] = {}
        self._read_at: float | None = None

    def users(self, *, fresh: bool = False) -> dict[str, dict[str, str | None]]:
        asked = self._clock.monotonic()
        with self._lock:
            if self._read_at is not None and not fresh and asked - self._read_at < self._ttl_s:
                return self._users
        with self._reading:
            # One read at a time: callers that asked while it ran share the next one, so a
            # flood of unknown tokens costs one read in flight, never one read each.
            with self._lock:
                if self._read_at is not None and self._read_at >= asked:
                    return self._users
            started = self._clock.monotonic()
            data = self._store.read(IDENTITY_BUCKET, USERS_PATH)
            users = dict(_parse(data).get("users", {}))
            with self._lock:
                self._users, self._read_at = users, started
            return users

    def edit(self, change: Callable[[Document], T]) -> T:
        if self._store.info(IDENTITY_BUCKET) is None:
            self._store.create(IDENTITY_BUCKET, creator=IDENTITY_CREATOR, private=True)
        results: list[T] = []

        def apply(data: bytes | None) -> bytes:
            document: dict[str, Any] = _parse(data)
            results[:] = [change(document)]
            return json.dumps(document, indent=2, sort_keys=True).encode()

        compare_and_swap(self._store, IDENTITY_BUCKET, USERS_PATH, apply)
        with self._lock:
            self._read_at = None
        return results[0]
