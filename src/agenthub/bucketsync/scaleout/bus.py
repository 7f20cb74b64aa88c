"""The Redis adapter of the `Notifier` port: wakes and "folder changed" events published
by any worker reach every worker (`BUCKETSYNC_BUS_URL=redis://…`).

A worker delivers its own wakes locally at once (no round trip on the hot path) and
publishes them with its origin id; the listener skips its own messages. Other workers first
invalidate the named read-model folders (their listing caches would otherwise miss the
write for up to `LISTING_TTL_S`) and then wake their waiters, so a woken waiter's re-check
sees the record it was woken for — the seed's W1-before-W2 ordering, across processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterable

import redis
import redis.asyncio as aioredis

from agenthub.bucketsync.core.notify import InProcessNotifier, Listener, NotifierHealth
from agenthub.bucketsync.errors import StorageUnavailable

log = logging.getLogger(__name__)

FolderListener = Callable[[frozenset[str]], None]


class RedisBus:
    def __init__(self, url: str, prefix: str) -> None:
        self.url = url
        self.channel = f"{prefix}bus"
        self.origin = uuid.uuid4().hex
        self._client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
        self._lock = threading.Lock()
        self._local = InProcessNotifier()  # this worker's waiters
        self._folder_listeners: list[FolderListener] = []
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self.published = 0
        self.received = 0
        self.publish_failures = 0

    # -- the Notifier port --------------------------------------------------------------
    @property
    def wakes(self) -> int:
        return self._local.wakes

    def subscribe(self, listener: Listener) -> None:
        self._local.subscribe(listener)

    def on_folders_changed(self, listener: FolderListener) -> None:
        with self._lock:
            self._folder_listeners.append(listener)

    def wake(self, keys: Iterable[str]) -> frozenset[str]:
        batch = frozenset(keys)
        if not batch:
            return frozenset()
        woken = self._local.wake(batch)
        self._publish({"keys": sorted(batch)})
        return woken

    def folders_changed(self, folders: Iterable[str]) -> None:
        changed = sorted(set(folders))
        if changed:
            self._publish({"folders": changed})

    def _publish(self, event: dict[str, object]) -> None:
        payload = json.dumps({"origin": self.origin, **event})
        try:
            self._client.publish(self.channel, payload)
            self.published += 1
        except redis.RedisError as exc:
            # The write is committed; other workers' waiters fall back to their budget and
            # their caches to the TTL. Counted so /v1/healthz shows it.
            self.publish_failures += 1
            log.error("bus publish failed: %s", exc)

    # -- the listener (one task per worker, started in the app lifespan) ---------------
    def check(self) -> None:
        """Fail start-up loudly when Redis is unreachable."""
        try:
            self._client.ping()
        except redis.RedisError as exc:
            raise StorageUnavailable(
                f"BUCKETSYNC_BUS_URL {self.url} is unreachable: {exc}",
                hint="start Redis or unset BUCKETSYNC_BUS_URL (single worker)",
            ) from exc

    async def start(self) -> None:
        self._ready = asyncio.Event()
        self._task = asyncio.create_task(self._listen(), name="bucketsync-bus")
        await asyncio.wait_for(self._ready.wait(), timeout=10)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._client.close()

    async def _listen(self) -> None:
        backoff = 0.5
        while True:
            client = aioredis.Redis.from_url(self.url)
            try:
                async with client.pubsub() as pubsub:
                    await pubsub.subscribe(self.channel)
                    self._ready.set()
                    backoff = 0.5
                    async for message in pubsub.listen():
                        if message.get("type") == "message":
                            self._dispatch(message["data"])
            except asyncio.CancelledError:
                raise
            except redis.RedisError as exc:
                log.error("bus listener lost Redis (%s); reconnecting in %.1fs", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)
            finally:
                await client.aclose()

    def _dispatch(self, data: bytes | str) -> None:
        try:
            event = json.loads(data)
        except (TypeError, ValueError):
            log.error("bus: ignoring a malformed event")
            return
        if not isinstance(event, dict) or event.get("origin") == self.origin:
            return
        self.received += 1
        with self._lock:
            folder_listeners = list(self._folder_listeners)
        folders = frozenset(str(f) for f in event.get("folders") or ())
        if folders:
            for listener in folder_listeners:
                listener(folders)
        keys = frozenset(str(k) for k in event.get("keys") or ())
        if keys:
            self._local.deliver(keys)

    def health(self) -> NotifierHealth:
        """The counters, and whether Redis answers a ping now (healthz probes it)."""
        try:
            self._client.ping()
            error = None
        except redis.RedisError as exc:
            error = f"{type(exc).__name__}: {exc}"
        return NotifierHealth(bus=self.stats(), error=error)

    def stats(self) -> dict[str, int]:
        return {
            "published": self.published,
            "received": self.received,
            "publish_failures": self.publish_failures,
        }
