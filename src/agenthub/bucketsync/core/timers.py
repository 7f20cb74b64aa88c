"""Timers of long-poll waits: time is an input. Every wait goes through a `Timer`
(`LoopTimer` in production, `ManualTimer` to move time by hand in tests); deadlines use
`Clock.monotonic()`."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Protocol

from agenthub.clock import FrozenClock


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
            loop.call_soon_threadsafe(resolve_future, tick)

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


def resolve_future(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


_EXPIRED: Any = object()


def _expire(future: asyncio.Future[None]) -> None:
    """A `LoopTimer` deadline: the future completes, marked as not rung."""
    if not future.done():
        future.set_result(_EXPIRED)
