"""Waking parked feed readers. A write wakes the event loop only while a reader is parked,
and the watermark poll (SQLite, PostgreSQL `xid` mode) probes only then; neither ever
misses a change that landed while nobody was parked."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from agenthub.statehub.wake import FeedWake, poll

INTERVAL = 0.005
Poll = Callable[[Callable[[], int], FeedWake, float], Coroutine[Any, Any, None]]


class Source:
    """A high water another process moves, and a count of the probes that read it."""

    def __init__(self) -> None:
        self.high_water = 1
        self.probes = 0

    def probe(self) -> int:
        self.probes += 1
        return self.high_water


async def _idle_then_park(poller: Poll, source: Source) -> tuple[int, bool]:
    """Idle for 40 intervals, then: a reader takes the generation and checks (it sees
    nothing new), another process commits, and the reader parks. Returns the probes made
    while idle and whether the parked reader was woken."""
    wake = FeedWake()
    task = asyncio.create_task(poller(source.probe, wake, INTERVAL))
    try:
        await asyncio.sleep(INTERVAL * 40)
        idle_probes = source.probes
        generation = wake.generation  # the reader's protocol: generation, check, park
        source.high_water = 2  # lands after the check, before the park
        woken = await wake.wait_past(generation, INTERVAL * 100)
        return idle_probes, woken
    finally:
        task.cancel()


def test_an_idle_poll_probes_nothing_and_still_wakes_the_next_parked_reader() -> None:
    source = Source()
    idle_probes, woken = asyncio.run(_idle_then_park(poll, source))
    assert idle_probes == 1  # the baseline only
    assert woken


async def _rebaselining_poll(probe: Callable[[], int], wake: FeedWake, interval: float) -> None:
    """The broken variant: takes a fresh baseline when a reader parks after an idle spell."""
    last: int | None = None
    while True:
        if not wake.parked:
            last = None
        else:
            current = await asyncio.to_thread(probe)
            if last is not None and current != last:
                wake.bump()
            last = current
        await asyncio.sleep(interval)


def test_a_poll_that_rebaselines_on_park_misses_the_change() -> None:
    _, woken = asyncio.run(_idle_then_park(_rebaselining_poll, Source()))
    assert not woken


class CountingLoop(asyncio.SelectorEventLoop):
    """An event loop that counts the cross-thread wakes it was sent."""

    def __init__(self) -> None:
        super().__init__()
        self.threadsafe_calls = 0

    def call_soon_threadsafe(self, *args: Any, **kwargs: Any) -> asyncio.Handle:  # type: ignore[override]
        self.threadsafe_calls += 1
        return super().call_soon_threadsafe(*args, **kwargs)


def _in_thread(action: Callable[[], None]) -> None:
    thread = threading.Thread(target=action)
    thread.start()
    thread.join()


def _bump_then_park(bump: Callable[[FeedWake], None]) -> tuple[int, bool]:
    """A reader takes the generation and checks; a write commits in another thread and
    bumps while nobody is parked; then the reader parks. Returns the loop wakes sent and
    whether the reader returned at once."""
    loop = CountingLoop()
    wake = FeedWake()
    wake.bind(loop)

    async def reader() -> bool:
        generation = wake.generation
        _in_thread(lambda: bump(wake))
        return await wake.wait_past(generation, 0.5)

    try:
        woken = loop.run_until_complete(reader())
    finally:
        loop.close()
    return loop.threadsafe_calls, woken


def test_a_write_with_nobody_parked_wakes_no_loop_and_is_not_lost() -> None:
    calls, woken = _bump_then_park(FeedWake.bump_threadsafe)
    assert calls == 0
    assert woken


def _skip_when_idle(wake: FeedWake) -> None:
    """The broken variant: with nobody parked, skip the bump altogether."""
    if wake.parked:
        wake.bump_threadsafe()


def test_skipping_the_whole_bump_when_idle_loses_the_write() -> None:
    _, woken = _bump_then_park(_skip_when_idle)
    assert not woken


def test_a_write_wakes_a_parked_reader_from_another_thread() -> None:
    loop = CountingLoop()
    wake = FeedWake()
    wake.bind(loop)

    async def reader() -> bool:
        generation = wake.generation
        loop.call_later(0.05, lambda: threading.Thread(target=wake.bump_threadsafe).start())
        return await wake.wait_past(generation, 5)

    try:
        woken = loop.run_until_complete(reader())
    finally:
        loop.close()
    assert woken
    assert loop.threadsafe_calls == 1
