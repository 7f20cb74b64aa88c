"""The Redis adapter of the `PresenceMap` port: each worker's presence stamps and parked
waiters, so a post on any worker forecasts its reach across all of them.

Layout under the bus prefix:
- `{prefix}seen` — a hash `handle → epoch seconds` of the newest `wait>0` read;
- `{prefix}parked:{handle}` — a hash `{worker}:{waiter} → {"worker", "keys": [...],
  "until": epoch}`, one field per parked waiter, removed when it unparks; `until` (its
  budget's end) bounds what a crashed worker can leave behind, and the key expires after
  `LINGER_S` untouched.

The registry reports from the event loop, so writes are queued and sent by one thread in
pipelined batches: a slow or absent Redis never stalls a long-poll, it only makes other
workers forecast `next_poll` instead of `woken`. A lookup is ONE command (`LOOKUP`, a
script: a 65-command pipeline for a 64-agent broadcast cost ~15x more, most of it
client-side encoding and parsing); it names the per-handle keys itself, so it assumes one
Redis, not a cluster.
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

# KEYS: the seen hash, the parked-key prefix; ARGV: handles. Answers, for each handle with
# anything known, `handle, seen stamp or "", [parked entries]`.
LOOKUP = """
local seen = redis.call('HMGET', KEYS[1], unpack(ARGV))
local found = {}
for i, handle in ipairs(ARGV) do
  local parked = redis.call('HVALS', KEYS[2] .. handle)
  if seen[i] or #parked > 0 then
    found[#found + 1] = handle
    found[#found + 1] = seen[i] or ''
    found[#found + 1] = parked
  end
end
return found
"""


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
        self._lookup = client.register_script(LOOKUP)
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
        value = json.dumps({"worker": self.origin, "keys": sorted(keys), "until": until})
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
        try:
            rows = self._lookup(keys=[self._seen_key(), self._parked_key("")], args=handles)
        except redis.RedisError as exc:
            # The post is committed; its forecast falls back to this worker's registry.
            log.error("presence lookup failed: %s", exc)
            return {}
        found: dict[str, Sighting] = {}
        for at in range(0, len(rows) - 2, 3):
            handle, stamp, waiters = _text(rows[at]), rows[at + 1], rows[at + 2]
            parked = tuple(
                keys for raw in waiters if (keys := self._live_keys(raw, now)) is not None
            )
            seen_at = _epoch(stamp)
            if seen_at is not None or parked:
                found[handle] = Sighting(seen_at, parked)
        return found

    def _live_keys(self, raw: bytes | str, now: float) -> frozenset[str] | None:
        """Another worker's parked waiter's wake keys; None for this worker's own (its
        registry knows them exactly) and once the budget is over (a crashed worker)."""
        try:
            entry = json.loads(_text(raw))
            if entry["worker"] == self.origin or float(entry["until"]) < now:
                return None
            return frozenset(str(key) for key in entry["keys"])
        except (ValueError, KeyError, TypeError):
            return None

    def stats(self) -> dict[str, int] | None:
        with self._lock:
            return {"queued": self.queued, "written": self.written, "failures": self.failures}


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


def _epoch(raw: bytes | str | None) -> float | None:
    if not raw:
        return None
    try:
        return float(_text(raw))
    except ValueError:
        return None
