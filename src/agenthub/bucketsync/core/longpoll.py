"""Long-poll (seed §13): a watched read's register → check → park → re-check loop, on the
waiter registry (`waiters.WaiterRegistry`) and a `timers.Timer`; its answer's `watch` block.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agenthub.bucketsync.core.timers import Timer
from agenthub.bucketsync.core.waiters import WaiterRegistry
from agenthub.clock import Clock

# A page key (never sent): how many items wait above the streams' watermark
# (`StampIssuer.watermark`); a watch with nothing to deliver but those waits for them.
HELD = "_held"
# A held watch re-checks this often even unrung (a lease may free the watermark silently).
HELD_RECHECK_S = 0.25

Page = dict[str, Any]


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
