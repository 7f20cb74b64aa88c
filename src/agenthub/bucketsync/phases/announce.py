"""Landscape events at phase boundaries, emitted lazily: no timer runs; the first request
after a boundary passed (by the injected clock) writes one `phase:changed` event naming
every boundary passed since the last one announced, addressed to everyone and waking every
watcher. Idempotent across requests, workers and restarts: under the lock `phase events`,
a boundary is announced only when its marker (`phases/announced/{phase}.{opened|closed}`
in the audit bucket, read as stored, not cached) is absent, and the markers are written
after the event. A worker remembers the boundaries it saw announced, so the steady state
costs a comparison of the clock with the schedule and no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.perreadmodel import PerReadModel
from agenthub.bucketsync.landscape.events import Change
from agenthub.bucketsync.landscape.publish import publish
from agenthub.bucketsync.phases.schedule import reveal_at, situation
from agenthub.bucketsync.settings import Phase
from agenthub.bucketsync.storage.base import Batch

MARKERS = "phases/announced/"
LOCK = "phase events"


@dataclass(frozen=True)
class Boundary:
    at: datetime
    phase: str
    change: str  # opened | closed

    @property
    def key(self) -> str:
        return f"{self.phase}.{self.change}"


def boundaries(phases: list[Phase]) -> list[Boundary]:
    found = [Boundary(p.start, p.name, "opened") for p in phases]
    found += [Boundary(p.end, p.name, "closed") for p in phases]
    # At one instant a phase closes before the next one opens.
    return sorted(found, key=lambda b: (b.at, b.change != "closed"))


_SEEN: PerReadModel[set[str]] = PerReadModel(set)


def due(hub: Hub) -> list[Boundary]:
    """Boundaries passed that this worker has not seen announced (no I/O)."""
    phases = hub.settings.challenge_phases
    if not phases:
        return []
    now = hub.clock.now()
    seen = _SEEN.of(hub.read_model)
    return [b for b in boundaries(phases) if b.at <= now and b.key not in seen]


def observe(hub: Hub) -> str | None:
    """Announce the boundaries passed since the last announced one; the event's path, or
    None when there was nothing to announce (or another request already did)."""
    if not due(hub):
        return None
    audit = hub.settings.audit_bucket
    seen = _SEEN.of(hub.read_model)
    with hub.locks.hold(LOCK) as lease:
        pending = [b for b in due(hub) if hub.store.read(audit, f"{MARKERS}{b.key}") is None]
        path = publish(hub, _change(hub, pending)) if pending else None
        if pending:
            markers = [(f"{MARKERS}{b.key}", naming.iso_now(b.at).encode()) for b in pending]
            lease.write(lambda: hub.store.write_batch(audit, Batch(adds=markers)))
        seen.update(b.key for b in due(hub))
    return path


def _change(hub: Hub, passed: list[Boundary]) -> Change:
    phases = hub.settings.challenge_phases
    now = hub.clock.now()
    where = situation(phases, now)
    at = reveal_at(phases)
    found = Change(cause="phase", result="")
    found.phase = {
        "changes": [
            {"phase": b.phase, "change": b.change, "at": naming.iso_now(b.at)} for b in passed
        ],
        "current": where.current.name if where.current is not None else None,
        "ends_at": naming.iso_now(where.current.end) if where.current is not None else None,
        "next": where.next.name if where.next is not None else None,
        "next_starts_at": naming.iso_now(where.next.start) if where.next is not None else None,
        "results_open": where.results_open,
        "private_split": None if at is None else ("revealed" if now >= at else "sealed"),
    }
    for b in passed:
        found.lines.append(f"Phase {b.phase!r} {b.change} at {naming.iso_now(b.at)}.")
    if where.current is not None:
        state = "open" if where.results_open else "closed"
        found.lines.append(
            f"Now: {where.current.name!r} until {naming.iso_now(where.current.end)}; "
            f"results are {state}."
        )
    elif where.next is not None:
        found.lines.append(
            f"No phase is open; {where.next.name!r} starts at {naming.iso_now(where.next.start)}."
        )
    else:
        found.lines.append("The challenge is over.")
    if at is not None and now >= at and any(b.at >= at for b in passed):
        found.lines.append("The private split is revealed: GET /v1/leaderboard/final.")
    return found
