"""The waiter registry of long-poll (seed §13): registering, parking and waking waiters.

Waiters live on the event loop; wakes arrive from any thread (the threadpool that runs the
write path, or the Redis bus listener). A wake sets the waiter's *latch* under the registry
lock first and only then rings its doorbell (resolves its parked future on its loop), so a
wake that lands while the waiter is checking (not parked) is absorbed by the latch, not lost.
The doorbells of one wake ring in one loop callback, queued behind whatever the loop already
had to do; a writer can also hold them until its own bookkeeping is done (`wakes_held`), so
the post's answer is not queued behind hundreds of woken waiters. The registry also keeps
who long-polled when (presence), for reach forecasts and GET /v1/presence.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from agenthub.bucketsync.core.reach import NoPresenceMap, PresenceMap
from agenthub.bucketsync.core.timers import Timer, resolve_future
from agenthub.clock import Clock

WAKE_ALL = "*"  # a broadcast: every waiter is a recipient (delivery is read-time union)

Outcome = Literal["woken", "evicted", "timeout"]


Doorbell = tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]


def _resolve_all(futures: list[asyncio.Future[None]]) -> None:
    for future in futures:
        resolve_future(future)


def _ring(doorbells: list[Doorbell]) -> None:
    """Resolve the parked futures, one callback per loop, queued (`call_soon`) behind what
    the loop already has ready: a thread that woke them and is about to return lets its own
    caller's continuation run before the woken waiters take the loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
    for loop, future in doorbells:
        by_loop.setdefault(loop, []).append(future)
    for loop, futures in by_loop.items():
        loop.call_soon_threadsafe(loop.call_soon, _resolve_all, futures)


@dataclass(eq=False)
class Waiter:
    owner: str
    keys: frozenset[str]
    loop: asyncio.AbstractEventLoop
    seq: int
    latched: bool = False
    evicted: bool = False
    delay: float = 0.0
    future: asyncio.Future[None] | None = None
    held: bool = False  # its stream's items wait above the watermark (it is listening)


@dataclass
class _Presence:
    at: float  # monotonic
    stream: str  # updates | inbox | feed


# Only `wait>0` reads stamp presence, so every entry is agent-collabs' `parked` mode.
PARKED = "parked"


@dataclass
class Counters:
    parks: int = 0
    wakes: int = 0
    evictions: int = 0
    degradations: int = 0


@dataclass
class WaiterRegistry:
    """`key → waiters` for one process (keys: `inbox:{handle}`, `channel:{name}`)."""

    clock: Clock
    max_per_owner: int = 4
    max_total: int = 256
    spread_threshold: int = 20
    spread_s: float = 8.0
    rng: random.Random = field(default_factory=random.Random)
    counters: Counters = field(default_factory=Counters)
    # Told of presence stamps and parks, so other workers' reach forecasts see them.
    presence_map: PresenceMap = field(default_factory=NoPresenceMap)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[str, set[Waiter]] = {}
        self._by_owner: dict[str, list[Waiter]] = {}
        self._count = 0  # waiters in `_by_owner`, kept as they come and go
        self._seq = itertools.count()
        self._presence: dict[str, _Presence] = {}
        self._held = threading.local()
        self._behind: set[Waiter] = set()  # waiting for the watermark, not for a key

    # -- registration -------------------------------------------------------------------
    def register(self, owner: str, keys: Iterable[str]) -> Waiter | None:
        """A slot for `owner`, evicting their oldest waiter past the per-owner cap; None
        when the process is full (the caller degrades instead of parking)."""
        loop = asyncio.get_running_loop()
        evicted: Waiter | None = None
        with self._lock:
            mine = self._by_owner.get(owner, [])
            if len(mine) >= self.max_per_owner:
                evicted = mine[0]
                evicted.evicted = True
                self._remove(evicted)
                self.counters.evictions += 1
            if self._count >= self.max_total:
                self.counters.degradations += 1
                waiter = None
            else:
                waiter = Waiter(owner, frozenset(keys), loop, next(self._seq))
                self._by_owner.setdefault(owner, []).append(waiter)
                self._count += 1
                for key in waiter.keys:
                    self._by_key.setdefault(key, set()).add(waiter)
            future = evicted.future if evicted is not None else None
        if evicted is not None and future is not None:
            evicted.loop.call_soon_threadsafe(resolve_future, future)
        return waiter

    def unregister(self, waiter: Waiter) -> None:
        with self._lock:
            self._remove(waiter)
            self._behind.discard(waiter)

    def hold(self, waiter: Waiter, held: bool = True) -> None:
        """`waiter`'s stream has items above the watermark (`held`): ring it when that
        moves. A held waiter counts as parked, also while it re-checks."""
        with self._lock:
            waiter.held = held
            if held:
                self._behind.add(waiter)
            else:
                self._behind.discard(waiter)

    def watermark_moved(self) -> None:
        """The watermark may have passed held items: latch and ring the held waiters."""
        if not self._behind:  # read without the lock: a waiter added meanwhile re-checks
            return
        with self._lock:
            behind, self._behind = self._behind, set()
            resolve: list[Doorbell] = []
            for waiter in behind:
                waiter.latched = True
                if waiter.future is not None:
                    resolve.append((waiter.loop, waiter.future))
        if resolve:
            _ring(resolve)

    def _remove(self, waiter: Waiter) -> None:
        mine = self._by_owner.get(waiter.owner)
        if mine is None or waiter not in mine:
            return
        mine.remove(waiter)
        self._count -= 1
        if not mine:
            del self._by_owner[waiter.owner]
        for key in waiter.keys:
            holders = self._by_key.get(key)
            if holders is not None:
                holders.discard(waiter)
                if not holders:
                    del self._by_key[key]

    # -- waking -------------------------------------------------------------------------
    def deliver(self, keys: frozenset[str]) -> frozenset[str]:
        """The notifier listener: wake the waiters holding `keys`; returns the owners of
        those that were parked (the post's `reach.woken` in this process)."""
        return self._wake(keys)[1]

    def wake(self, keys: Iterable[str]) -> int:
        """Wake every waiter holding one of `keys` (all of them for WAKE_ALL); returns how
        many. Past `spread_threshold` targets each gets a uniform delay in [0, spread_s] so
        a broadcast does not become a synchronized re-poll spike."""
        return self._wake(keys)[0]

    def _wake(self, keys: Iterable[str]) -> tuple[int, frozenset[str]]:
        wanted = frozenset(keys)
        if not wanted:
            return 0, frozenset()
        resolve: list[Doorbell] = []
        parked: set[str] = set()
        with self._lock:
            if WAKE_ALL in wanted:
                targets = {w for ws in self._by_owner.values() for w in ws}
            else:
                targets = {w for key in wanted for w in self._by_key.get(key, ())}
            spread = len(targets) > self.spread_threshold
            for waiter in targets:
                delay = self.rng.uniform(0.0, self.spread_s) if spread else 0.0
                waiter.delay = min(waiter.delay, delay) if waiter.latched else delay
                waiter.latched = True
                if waiter.future is not None:
                    # Parked (its future may already be resolved by an earlier wake: it
                    # has not consumed the latch yet, so its re-check follows this write).
                    parked.add(waiter.owner)
                    resolve.append((waiter.loop, waiter.future))
            self.counters.wakes += len(targets)
        held: list[Doorbell] | None = getattr(self._held, "doorbells", None)
        if held is not None:
            held.extend(resolve)
        elif resolve:
            _ring(resolve)
        return len(targets), frozenset(parked)

    @contextmanager
    def wakes_held(self) -> Iterator[None]:
        """Wakes made by this thread inside the block latch their waiters at once (so who
        was parked, the post's `reach.woken`, is decided there) and ring their doorbells
        when the block ends, on any exit. A latched waiter whose budget ends meanwhile
        still answers `woken`: the latch, not the doorbell, is the wake."""
        if getattr(self._held, "doorbells", None) is not None:
            yield  # nested: the outer block rings
            return
        self._held.doorbells = []
        try:
            yield
        finally:
            doorbells: list[Doorbell] = self._held.doorbells
            self._held.doorbells = None
            _ring(doorbells)

    async def park(self, waiter: Waiter, timer: Timer, timeout_s: float) -> tuple[Outcome, float]:
        """Wait for a wake (returning the spread delay to honour), an eviction or the budget."""
        with self._lock:
            if waiter.evicted:
                return "evicted", 0.0
            if waiter.latched:
                return self._consume(waiter)
            future: asyncio.Future[None] = waiter.loop.create_future()
            waiter.future = future
            self.counters.parks += 1
        until = self.clock.now().timestamp() + timeout_s
        self.presence_map.parked(waiter.owner, waiter.seq, waiter.keys, until)
        try:
            await timer.wait(future, timeout_s)
        finally:
            # Also on cancellation (the client hung up): no other worker may count it.
            self.presence_map.unparked(waiter.owner, waiter.seq)
        with self._lock:
            waiter.future = None
            if waiter.evicted:
                return "evicted", 0.0
            if waiter.latched:
                return self._consume(waiter)
        return "timeout", 0.0

    @staticmethod
    def _consume(waiter: Waiter) -> tuple[Outcome, float]:
        delay, waiter.delay, waiter.latched = waiter.delay, 0.0, False
        return "woken", delay

    # -- observation --------------------------------------------------------------------
    def stamp_presence(self, handle: str, stream: str) -> None:
        with self._lock:
            self._presence[handle] = _Presence(self.clock.monotonic(), stream)
        self.presence_map.seen(handle, self.clock.now().timestamp())

    def seen_within(self, handles: Iterable[str], fresh_s: float) -> frozenset[str]:
        """Those of `handles` that long-polled in this process within `fresh_s`."""
        with self._lock:
            now = self.clock.monotonic()
            return frozenset(
                handle
                for handle in handles
                if (seen := self._presence.get(handle)) is not None and now - seen.at <= fresh_s
            )

    @staticmethod
    def _seen(seen: _Presence, now: float) -> dict[str, Any]:
        """One handle's presence in agent-collabs' shape (whole seconds, mode, stream)."""
        return {"last_poll_age_s": int(now - seen.at), "mode": PARKED, "stream": seen.stream}

    def presence(self, handle: str, fresh_s: float) -> dict[str, Any] | None:
        with self._lock:
            seen = self._presence.get(handle)
            now = self.clock.monotonic()
        if seen is None or now - seen.at > fresh_s:
            return None
        return self._seen(seen, now)

    def watching(self, fresh_s: float) -> dict[str, dict[str, Any]]:
        """Every handle that long-polled within `fresh_s`, with its parked waiter count."""
        with self._lock:
            now = self.clock.monotonic()
            for handle in [h for h, p in self._presence.items() if now - p.at > fresh_s]:
                del self._presence[handle]
            return {
                handle: {**self._seen(seen, now), "waiters": len(self._by_owner.get(handle, ()))}
                for handle, seen in sorted(self._presence.items())
            }

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "waiters": self._count,
                "owners": len(self._by_owner),
                "parked": sum(
                    1
                    for ws in self._by_owner.values()
                    for w in ws
                    if w.future is not None or w.held
                ),
                "held": sum(1 for ws in self._by_owner.values() for w in ws if w.held),
                "parks": self.counters.parks,
                "wakes": self.counters.wakes,
                "evictions": self.counters.evictions,
                "degradations": self.counters.degradations,
            }
