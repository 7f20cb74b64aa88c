"""The Redis adapter of the `Notifier` port: wakes and "folder changed" events published
by any worker reach every worker (`BUCKETSYNC_BUS_URL=redis://…`).

A worker delivers its own wakes locally at once (no round trip on the hot path) and
publishes them with its origin id; the listener skips its own messages. Other workers first
patch the named read-model folders with the files the write changed, or invalidate them
when the event does not say (`scaleout.buschanges`; their listing caches would otherwise
miss the write for up to `LISTING_TTL_S`), and then wake their waiters, so a woken
waiter's re-check sees the record it was woken for — the seed's W1-before-W2 ordering,
across processes.

Every event also carries the publisher's low mark (`core.stamps`), and each worker
publishes its mark every MARK_EVERY_S: the streams' watermark across workers. A worker
reads its own marks back too: Redis orders all publishes, so a worker it has not heard
from yet published before that echo and is known by the time the echo is applied.
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

from agenthub.bucketsync.core.notify import (
    FolderListener,
    InProcessNotifier,
    Listener,
    NotifierHealth,
)
from agenthub.bucketsync.errors import StorageUnavailable
from agenthub.bucketsync.scaleout import buschanges
from agenthub.bucketsync.storage.base import FileChange

log = logging.getLogger(__name__)

MarkListener = Callable[[str, str], None]
# How stale another worker's mark may be while it is idle: what a cross-worker delivery
# may wait for, at most, above the wake itself.
MARK_EVERY_S = 0.05


class RedisBus:
    def __init__(self, url: str, prefix: str) -> None:
        self.url = url
        self.channel = f"{prefix}bus"
        self.origin = uuid.uuid4().hex
        self._client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
        self._lock = threading.Lock()
        self._local = InProcessNotifier()  # this worker's waiters
        self._folder_listeners: list[FolderListener] = []
        self._mark_listener: MarkListener | None = None
        self._mark_source: Callable[[], str] | None = None
        self._task: asyncio.Task[None] | None = None
        self._marks: asyncio.Task[None] | None = None
        self._stopping = False
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

    def on_mark(self, listener: MarkListener, source: Callable[[], str]) -> None:
        """Publish `source()` (this worker's low mark) with every event and every
        MARK_EVERY_S; call `listener(worker, mark)` for every mark received, ours too."""
        self._mark_listener, self._mark_source = listener, source

    def announce(self) -> None:
        """Publish this worker's mark now (a stream is waiting for it to move)."""
        self._publish({})

    def wake(self, keys: Iterable[str]) -> frozenset[str]:
        batch = frozenset(keys)
        if not batch:
            return frozenset()
        woken = self._local.wake(batch)
        self._publish({"keys": sorted(batch)})
        return woken

    def folders_changed(
        self, folders: Iterable[str], changes: list[FileChange] | None = None
    ) -> None:
        changed = sorted(set(folders))
        if changed:
            wire = buschanges.encode(changes)
            self._publish({"folders": changed, **({} if wire is None else {"changes": wire})})

    def _event(self, event: dict[str, object]) -> str:
        mark = {"mark": self._mark_source()} if self._mark_source is not None else {}
        return json.dumps({"origin": self.origin, **event, **mark})

    def _publish(self, event: dict[str, object]) -> None:
        payload = self._event(event)
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
        self._stopping = False
        self._task = asyncio.create_task(self._listen(), name="bucketsync-bus")
        await asyncio.wait_for(self._ready.wait(), timeout=10)
        if self._mark_source is not None:
            self._publish({})  # known to the other workers before it issues a stamp
            self._marks = asyncio.create_task(self._publish_marks(), name="bucketsync-marks")

    async def stop(self) -> None:
        self._stopping = True
        for task in (self._marks, self._task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._marks = None
        self._client.close()

    async def _publish_marks(self) -> None:
        """This worker's mark, every MARK_EVERY_S (an idle worker's mark follows its
        clock; one that stops publishing is dropped by the others after their lease)."""
        client = aioredis.Redis.from_url(self.url, socket_timeout=5, socket_connect_timeout=5)
        try:
            # Not `while True`: redis-py may swallow the cancellation of a publish in
            # flight, and `stop()` would then await this loop forever.
            while not self._stopping:
                try:
                    await client.publish(self.channel, self._event({}))
                except redis.RedisError as exc:
                    self.publish_failures += 1
                    log.error("bus: publishing the mark failed: %s", exc)
                    await asyncio.sleep(1.0)
                await asyncio.sleep(MARK_EVERY_S)
        finally:
            await client.aclose()

    async def _listen(self) -> None:
        backoff = 0.5
        while not self._stopping:
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
        if not isinstance(event, dict):
            return
        mark = event.get("mark")
        if event.get("origin") == self.origin:
            if isinstance(mark, str) and self._mark_listener is not None:
                self._mark_listener(self.origin, mark)
            return
        folders = frozenset(str(f) for f in event.get("folders") or ())
        if folders or event.get("keys"):
            self.received += 1  # a write's event, not a mark alone
        with self._lock:
            folder_listeners = list(self._folder_listeners)
        if folders:
            changes = buschanges.decode(event.get("changes"))
            for listener in folder_listeners:
                listener(folders, changes)
        # After the folders (its writes are re-listed) and before the wake (the woken
        # waiter's re-check sees the mark its write moved).
        if isinstance(mark, str) and self._mark_listener is not None:
            self._mark_listener(str(event.get("origin")), mark)
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
