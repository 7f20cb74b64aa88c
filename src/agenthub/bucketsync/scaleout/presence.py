"""The Redis adapter of the `PresenceMap` port: each worker's presence stamps and parked
waiters, so a post on any worker forecasts its reach across all of them.

Layout under the bus prefix:
- `{prefix}seen` — a hash `handle → epoch seconds` of the newest `wait>0` read;
- `{prefix}parked:{handle}` — a hash `{worker}:{waiter} → {"keys": [...], "until": epoch}`,
  one field per parked waiter, removed when it unparks; `until` (its budget's end) bounds
  what a crashed worker can leave behind, and the key expires after `LINGER_S` untouched.

The registry reports from the event loop, so writes are queued and sent by one thread in
pipelined batches: a slow or absent Redis never stalls a long-poll, it only makes other
workers forecast `next_poll` instead of `woken`. A lookup is ONE pipelined round trip.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import redis

from agenthub.bucketsync.core.reach import Sighting

log = logging.getLogger(__name__)

# Longer than any budget (LONGPOLL_MAX_WAIT_S is 55 s): an abandoned hash does not linger.
LINGER_S = 600
# Presence stamps older than this are useless to any fresh_s setting we ship.
SEEN_LINGER_S = 24 * 3600


@dataclass(frozen=True)
class _Op:
    kind: str  # seen | parked | unparked
    handle: str
    field: str = ""
    value: str = ""


_STOP = _Op("stop", "")


class RedisPresence:
    def __init__(self, client: redis.Redis, prefix: str, *, origin: str | None = None) -> None:
        self._client = client
        self._prefix = prefix
        self.origin = origin or uuid.uuid4().hex
        self._queue: queue.SimpleQueue[_Op] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.queued = 0
        self.written = 0
        self.failures = 0

    def _seen_key(self) -> str:
        return f"{self._prefix}seen"

    def _parked_key(self, handle: str) -> str:
        return f"{self._prefix}parked:{handle}"

    # -- writes (never block the caller) -------------------------------------------------
    def seen(self, handle: str, at: float) -> None:
        self._put(_Op("seen", handle, value=repr(at)))

    def parked(self, owner: str, waiter: int, keys: frozenset[str], until: float) -> None:
        value = json.dumps({"keys": sorted(keys), "until": until})
        self._put(_Op("parked", owner, f"{self.origin}:{waiter}", value))

    def unparked(self, owner: str, waiter: int) -> None:
        self._put(_Op("unparked", owner, f"{self.origin}:{waiter}"))

    def _put(self, op: _Op) -> None:
        with self._lock:
            self.queued += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._drain, name="bucketsync-presence", daemon=True
                )
                self._thread.start()
        self._queue.put(op)

    def _drain(self) -> None:
        while True:
            batch = [self._queue.get()]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = _STOP in batch
            ops = [op for op in batch if op is not _STOP]
            if ops:
                self._send(ops)
            if stop:
                return

    def _send(self, ops: list[_Op]) -> None:
        pipe = self._client.pipeline(transaction=False)
        for op in ops:
            if op.kind == "seen":
                pipe.hset(self._seen_key(), op.handle, op.value)
                pipe.expire(self._seen_key(), SEEN_LINGER_S)
            elif op.kind == "parked":
                pipe.hset(self._parked_key(op.handle), op.field, op.value)
                pipe.expire(self._parked_key(op.handle), LINGER_S)
            else:
                pipe.hdel(self._parked_key(op.handle), op.field)
        try:
            pipe.execute()
        except redis.RedisError as exc:
            with self._lock:
                self.failures += len(ops)
            log.error("presence: %d updates not shared (%s)", len(ops), exc)
            return
        with self._lock:
            self.written += len(ops)

    def close(self, timeout_s: float = 5.0) -> None:
        """Send what is queued, stop the writer and close the client (the app's shutdown)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(_STOP)
            thread.join(timeout_s)
        self._client.close()

    # -- the lookup ----------------------------------------------------------------------
    def sightings(self, handles: Sequence[str], now: float) -> dict[str, Sighting]:
        if not handles:
            return {}
        pipe = self._client.pipeline(transaction=False)
        pipe.hmget(self._seen_key(), list(handles))
        for handle in handles:
            pipe.hgetall(self._parked_key(handle))
        try:
            seen, *parked = pipe.execute()
        except redis.RedisError as exc:
            # The post is committed; its forecast falls back to this worker's registry.
            log.error("presence lookup failed: %s", exc)
            return {}
        found: dict[str, Sighting] = {}
        for handle, stamp, waiters in zip(handles, seen, parked, strict=True):
            keys = tuple(
                keys
                for name, raw in waiters.items()
                if not _text(name).startswith(f"{self.origin}:")  # this worker knows its own
                and (keys := _live_keys(raw, now)) is not None
            )
            if stamp is not None or keys:
                found[handle] = Sighting(_epoch(stamp), keys)
        return found

    def stats(self) -> dict[str, int] | None:
        with self._lock:
            return {"queued": self.queued, "written": self.written, "failures": self.failures}


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


def _epoch(raw: bytes | str | None) -> float | None:
    if raw is None:
        return None
    try:
        return float(_text(raw))
    except ValueError:
        return None


def _live_keys(raw: bytes | str, now: float) -> frozenset[str] | None:
    """A parked waiter's wake keys, or None once its budget is over (a crashed worker)."""
    try:
        entry = json.loads(_text(raw))
        if float(entry["until"]) < now:
            return None
        return frozenset(str(key) for key in entry["keys"])
    except (ValueError, KeyError, TypeError):
        return None
