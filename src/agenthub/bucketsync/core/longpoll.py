"""Long-poll (seed §13): the waiter registry and the register → check → park → re-check loop.

Waiters live on the event loop; wakes arrive from any thread (the threadpool that runs the
write path, or the Redis bus listener). A wake sets the waiter's *latch* under the registry
lock first and only then rings its doorbell (resolves its parked future on its loop), so a
wake that lands while the waiter is checking (not parked) is absorbed by the latch, not lost.
The doorbells of one wake ring in one loop callback, queued behind whatever the loop already
had to do; a writer can also hold them until its own bookkeeping is done (`wakes_held`), so
the post's answer is not queued behind hundreds of woken waiters.

Time is an input: deadlines use `Clock.monotonic()` and every wait goes through a `Timer`
(`LoopTimer` in production, `ManualTimer` to move time by hand in tests).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agenthub.bucketsync.core.reach import NoPresenceMap, PresenceMap
from agenthub.clock import Clock, FrozenClock

WAKE_ALL = "*"  # a broadcast: every waiter is a recipient (delivery is read-time union)
# A page key (never sent): how many items wait above the streams' watermark
# (`StampIssuer.watermark`); a watch with nothing to deliver but those waits for them.
HELD = "_held"
# A held watch re-checks this often even unrung (a lease may free the watermark silently).
HELD_RECHECK_S = 0.25

Outcome = Literal["woken", "evicted", "timeout"]
Page = dict[str, Any]


class Timer(Protocol):
    async def wait(self, future: asyncio.Future[None], timeout_s: float) -> bool:
        """Wait for `future` up to `timeout_s`; True if it completed."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class LoopTimer:
    """Real time on the running event loop.

    A wait awaits the future itself, with a timer that resolves it at the deadline: a
    doorbell then wakes its waiter's task in one step. (`asyncio.wait` added a waiter
    future, a callback each way and a second loop round per waiter, which a broadcast
    pays hundreds of times over.)"""

    async def wait(self, future: asyncio.Future[None], timeout_s: float) -> bool:
        if future.done():
            return True
        expiry = future.get_loop().call_later(max(0.0, timeout_s), _expire, future)
        try:
            await future
        finally:
            expiry.cancel()
        return future.result() is not _EXPIRED

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class ManualTimer:
    """A timer on a `FrozenClock`: waits end when their future completes or when a test
    `advance`s the clock past their deadline — budgets are never slept for real."""

    def __init__(self, clock: FrozenClock) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._ticks: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    @property
    def sleepers(self) -> int:
        with self._lock:
            return len(self._ticks)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.clock.advance(seconds)
            ticks, self._ticks = self._ticks, []
        for loop, tick in ticks:
            loop.call_soon_threadsafe(_resolve, tick)

    async def _until(self, deadline: float, future: asyncio.Future[None] | None) -> bool:
        loop = asyncio.get_running_loop()
        while True:
            if future is not None and future.done():
                return True
            tick: asyncio.Future[None] = loop.create_future()
            with self._lock:
                if self.clock.monotonic() >= deadline:
                    return False
                self._ticks.append((loop, tick))
            waits: set[asyncio.Future[None]] = {tick} if future is None else {tick, future}
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)

    async def wait(self, future: asyncio.Future[None], timeout_s: float) -> bool:
        return await self._until(self.clock.monotonic() + timeout_s, future)

    async def sleep(self, seconds: float) -> None:
        await self._until(self.clock.monotonic() + seconds, None)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


_EXPIRED: Any = object()


def _expire(future: asyncio.Future[None]) -> None:
    """A `LoopTimer` deadline: the future completes, marked as not rung."""
    if not future.done():
        future.set_result(_EXPIRED)


Doorbell = tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]


def _resolve_all(futures: list[asyncio.Future[None]]) -> None:
    for future in futures:
        _resolve(future)


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
            evicted.loop.call_soon_threadsafe(_resolve, future)
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


@dataclass
class LongPoll:
    """Everything a watched read needs: the registry, the timer and the budgets."""

    registry: WaiterRegistry
    timer: Timer
    clock: Clock
    max_wait_s: float = 55.0
    rng: random.Random = field(default_factory=random.Random)
    degraded_hold_s: tuple[float, float] = (5.0, 15.0)

    def clamp(self, wait_s: float) -> float:
        return min(max(0.0, wait_s), self.max_wait_s)

    async def read(
        self,
        *,
        owner: str,
        mode: str,
        wait_s: float,
        prepare: Callable[[], Awaitable[list[str]]],
        check: Callable[[], Awaitable[Page]],
    ) -> Page:
        """A read that may park. `wait_s <= 0` is a plain poll (`watch: null`); otherwise
        `prepare()` validates the handle and returns the wake keys BEFORE any slot or
        presence stamp is given (fabricated handles cannot fill the registry)."""
        if wait_s <= 0:
            page = await check()
            page.pop(HELD, None)
            return {**page, "watch": None}
        keys = await prepare()
        self.registry.stamp_presence(owner, mode)
        return await self.watch(owner=owner, keys=keys, wait_s=wait_s, check=check)

    async def watch(
        self,
        *,
        owner: str,
        keys: Iterable[str],
        wait_s: float,
        check: Callable[[], Awaitable[Page]],
    ) -> Page:
        """Answer with `check()`'s page as soon as it has items, else when the budget ends;
        the page gains `watch: {status, waited_ms}`."""
        start = self.clock.monotonic()
        key_set = frozenset(keys)

        def answer(page: Page, status: str) -> Page:
            page.pop(HELD, None)
            waited_ms = round((self.clock.monotonic() - start) * 1000)
            return {**page, "watch": {"status": status, "waited_ms": max(0, waited_ms)}}

        if not key_set:
            return answer(await check(), "no_streams")
        # Register BEFORE the first check: a write landing between the check and the park
        # then finds the waiter and sets its latch.
        waiter = self.registry.register(owner, key_set)
        if waiter is None:
            page = await check()
            if page["items"]:
                return answer(page, "delivered")
            # Answering instantly-empty made shed clients hot-loop; hold them, jittered.
            low, high = self.degraded_hold_s
            await self.timer.sleep(min(wait_s, self.rng.uniform(low, high)))
            return answer(await check(), "degraded")
        try:
            deadline = start + wait_s
            # The budget the held re-checks have slept: the wait ends with it even on a
            # clock that does not move (a FrozenClock under a real timer).
            budget = wait_s
            page = await check()
            while True:
                if page["items"]:
                    return answer(page, "delivered")
                remaining = min(deadline - self.clock.monotonic(), budget)
                if remaining <= 0:
                    return answer(page, "timeout")
                # Items above the watermark: woken when it moves, re-checked at least
                # every HELD_RECHECK_S (a stamp's lease ends without a ring).
                held = bool(page.get(HELD))
                self.registry.hold(waiter, held)
                if held:
                    remaining = min(remaining, HELD_RECHECK_S)
                outcome, delay = await self.registry.park(waiter, self.timer, remaining)
                if outcome == "timeout" and held:
                    budget -= remaining
                    page = await check()
                    continue
                if outcome != "woken":
                    return answer(page, outcome)
                if delay > 0:
                    await self.timer.sleep(min(delay, max(0.0, deadline - self.clock.monotonic())))
                # A spurious wake (filters exclude the new record) re-parks on what is left.
                page = await check()
        finally:
            self.registry.unregister(waiter)
