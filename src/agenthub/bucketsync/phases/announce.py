"""Landscape events at phase boundaries: the boundary's timer (`phases.timer`), or else the
first request after a boundary passed (by the injected clock), writes one `phase:changed`
event naming every boundary passed since the last one announced, addressed to everyone
and waking every watcher. A worker remembers the boundaries it saw announced, so the steady state costs a
comparison of the clock with the schedule and no I/O.

Exactly once, across requests, workers, restarts and hosts sharing an S3 bucket with no
common lock, in two steps, each an edit of one shared file (`core.shared.edits`: under the
lock `phase events` on local and HF stores, compare-and-swap on S3):

1. Claim: the ledger `phases/announced.json` in the audit bucket maps each announced
   boundary (`{phase}.{opened|closed}`) to the path of its event. One edit adds every
   passed boundary it lacks, all mapped to one new event path (its stamp issued now), so
   of two hosts passing a boundary together one claims it and the other reads the claim.
2. Write: the event at the claimed path, only if that file is absent (create-if-absent).
   Every worker that finds a claim of a boundary it has not seen announced writes the
   claimed event if it is missing, from the boundaries mapped to it: a crash between the
   claim and the write loses nothing (the next request anywhere writes it, under the
   claimed stamp), and two writers of one claim write one file.

Boundaries passed together make one event, unless two hosts whose clocks disagree claim
them in two edits: then each boundary is still announced once, in one of two events.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.perreadmodel import PerReadModel
from agenthub.bucketsync.core.shared import edits
from agenthub.bucketsync.landscape.events import Change
from agenthub.bucketsync.landscape.publish import new_path, render, wake
from agenthub.bucketsync.phases.schedule import reveal_at, situation
from agenthub.bucketsync.settings import Phase

LEDGER = "phases/announced.json"
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
    """Announce the boundaries passed since the last announced one; the path of the event
    this call wrote, or None when there was nothing to write (another request did)."""
    passed = due(hub)
    if not passed:
        return None
    audit = hub.settings.audit_bucket
    fresh: str | None = None
    try:
        for edit in edits(hub, audit, LEDGER, LOCK):
            ledger = ledger_of(edit.data)
            pending = [b.key for b in passed if b.key not in ledger]
            if pending:
                fresh = fresh or new_path(hub)
                edit.write(_encode({**ledger, **dict.fromkeys(pending, fresh)}))
        ledger = ledger_of(edit.written if edit.written is not None else edit.data)
        claims = {ledger[b.key] for b in passed if b.key in ledger}
        wrote = [path for path in sorted(claims) if _write(hub, path, ledger)]
    finally:
        if fresh is not None:  # written, or claimed by nobody: it holds no stream back
            hub.stamps.settle([fresh.rsplit("/", 1)[-1]])
    _SEEN.of(hub.read_model).update(b.key for b in passed)
    return wrote[-1] if wrote else None


def _write(hub: Hub, path: str, ledger: dict[str, str]) -> bool:
    """Write the event claimed at `path` unless it is there; True if this call wrote it."""
    claimed = [b for b in boundaries(hub.settings.challenge_phases) if ledger.get(b.key) == path]
    found = _change(hub, claimed)
    for edit in edits(hub, hub.central, path, LOCK):
        if edit.data is None:
            edit.write(render(found, path))
    if edit.written is None:
        return False
    wake(hub, found)
    return True


def ledger_of(data: bytes | None) -> dict[str, str]:
    """The ledger file's claims: boundary key -> event path."""
    parsed = json.loads(data) if data else {}
    return {str(k): str(v) for k, v in parsed.items()} if isinstance(parsed, dict) else {}


def _encode(ledger: dict[str, str]) -> bytes:
    return json.dumps(ledger, sort_keys=True, indent=1).encode()


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
