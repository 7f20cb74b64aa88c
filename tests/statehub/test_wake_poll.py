"""The watermark wake poll (SQLite, PostgreSQL `xid` mode) probes only while a reader is
parked, and still never misses a change that landed while nobody was: the first probe
after a reader parks compares against the last value probed, however old."""

from __future__ import annotations

import asyncio
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
