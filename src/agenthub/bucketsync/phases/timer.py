"""Announcing a phase boundary when it passes, not at the first request after it.

Each worker runs one task (started and cancelled with the app's lifespan) that sleeps
until the next boundary ahead of it, by the injected clock, then announces it
(`announce.observe`, exactly once across workers and hosts). A parked watcher is woken at
the boundary even when no request comes. The request path (`api.phases.PhaseEvents`)
stays the fallback: a boundary that passed while no worker ran (the server was down) is
announced by the first request after the start, and one the task failed to write (the
store down) by the next request.
"""

from __future__ import annotations

import asyncio
import logging

from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.phases import announce

log = logging.getLogger(__name__)

# The clock is read again at least this often (a clock set forward, a long first wait).
LONGEST_SLEEP_S = 60.0
# Past the boundary by this much, so the clock's reading is not a hair before it.
SLACK_S = 0.05


async def announce_at_boundaries(hub: Hub) -> None:
    """Sleep to each boundary ahead of the start and announce it when it passes."""
    phases = hub.settings.challenge_phases
    if not phases:
        return
    started = hub.clock.now()
    for at in sorted({b.at for b in announce.boundaries(phases) if b.at > started}):
        while (wait := (at - hub.clock.now()).total_seconds()) > 0:
            await asyncio.sleep(min(wait + SLACK_S, LONGEST_SLEEP_S))
        try:
            await asyncio.to_thread(_observe, hub)
        except Exception:
            log.exception("the phase boundary at %s was not announced; a request retries", at)


def _observe(hub: Hub) -> None:
    # Outside any request: settle what it stamps when it ends, as a request would.
    with hub.stamps.settling():
        announce.observe(hub)
