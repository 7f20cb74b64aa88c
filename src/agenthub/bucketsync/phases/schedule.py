"""The phase schedule as a pure function of the settings and a moment.

- The current phase is the one whose [start, end) holds the moment; between two phases,
  or before the first and after the last, there is none.
- Results are accepted only inside a current phase whose `results` rule is true; so are
  agents' benchmark jobs, capped per agent by the phase's `job_quota` when it sets one.
- The private split is revealed from the start of the first phase whose `split` is
  `private`, and stays revealed (a reveal is never taken back). Final-entry selections
  lock at that moment; without a private phase, at the end of the last phase that accepts
  results.
- No phases configured: everything is open, nothing is sealed, nothing locks.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.errors import PhaseClosed
from agenthub.bucketsync.settings import BucketSyncSettings, Phase


@dataclass(frozen=True)
class Situation:
    """Where `moment` falls in the schedule."""

    moment: datetime
    current: Phase | None
    next: Phase | None
    previous: Phase | None

    @property
    def results_open(self) -> bool:
        return self.current is not None and self.current.results


def situation(phases: list[Phase], moment: datetime) -> Situation:
    current = next((p for p in phases if p.start <= moment < p.end), None)
    upcoming = next((p for p in phases if p.start > moment), None)
    ended = [p for p in phases if p.end <= moment]
    return Situation(moment, current, upcoming, ended[-1] if ended else None)


def reveal_at(phases: list[Phase]) -> datetime | None:
    """When the private split is revealed: the start of the first `split: private` phase."""
    return next((p.start for p in phases if p.split == "private"), None)


def has_private_split(settings: BucketSyncSettings) -> bool:
    return reveal_at(settings.challenge_phases) is not None


def sealed(settings: BucketSyncSettings, moment: datetime) -> bool:
    """Whether private-split scores must stay hidden at `moment`."""
    at = reveal_at(settings.challenge_phases)
    return at is not None and moment < at


def revealed(settings: BucketSyncSettings, moment: datetime) -> bool:
    at = reveal_at(settings.challenge_phases)
    return at is not None and moment >= at


def selection_deadline(phases: list[Phase]) -> datetime | None:
    """When final-entry selections lock (see the module docstring)."""
    at = reveal_at(phases)
    if at is not None:
        return at
    accepting = [p.end for p in phases if p.results]
    return max(accepting) if accepting else None


def _iso(moment: datetime) -> str:
    return naming.iso_now(moment)


def _left(until: datetime, moment: datetime) -> int:
    return max(0, int((until - moment).total_seconds()))


def wire(phase: Phase) -> dict[str, Any]:
    return {
        "name": phase.name,
        "start": _iso(phase.start),
        "end": _iso(phase.end),
        "results": phase.results,
        "job_quota": phase.job_quota,
        "split": phase.split,
    }


def next_hint(where: Situation) -> str:
    """The next phase and when it starts, in words (every refusal's hint)."""
    upcoming = where.next
    if upcoming is None:
        return "the challenge has no later phase: results are closed for good"
    left = _left(upcoming.start, where.moment)
    accepts = "accepts results" if upcoming.results else "accepts no results"
    return (
        f"the next phase, {upcoming.name!r}, starts at {_iso(upcoming.start)} "
        f"(in {left}s) and {accepts}; GET /v1 shows the schedule under `phase`"
    )


def require_results_open(settings: BucketSyncSettings, moment: datetime) -> None:
    """Refuse a result outside an open phase (409 PHASE_CLOSED); no phases: always open."""
    phases = settings.challenge_phases
    if not phases:
        return
    where = situation(phases, moment)
    if where.results_open:
        return
    if where.current is not None:
        why = f"phase {where.current.name!r} accepts no results"
    else:
        why = "no phase of this challenge is open now"
    raise PhaseClosed(f"results are closed: {why}", hint=next_hint(where))


def job_cap(settings: BucketSyncSettings, moment: datetime) -> int | None:
    """The per-agent 24h cap on benchmark jobs now: the phase's `job_quota` (None: the
    default); outside an open phase, 409 PHASE_CLOSED."""
    phases = settings.challenge_phases
    if not phases:
        return None
    where = situation(phases, moment)
    if not where.results_open:
        raise PhaseClosed(
            "benchmark jobs are closed: no phase accepting results is open now",
            hint=next_hint(where),
        )
    assert where.current is not None
    return where.current.job_quota


def describe(settings: BucketSyncSettings, moment: datetime) -> dict[str, Any] | None:
    """The `phase` block of `GET /v1` and the digest; None without phases."""
    phases = settings.challenge_phases
    if not phases:
        return None
    where = situation(phases, moment)
    current = where.current
    at = reveal_at(phases)
    deadline = selection_deadline(phases)
    return {
        "now": _iso(moment),
        "current": wire(current) if current is not None else None,
        "time_left_s": _left(current.end, moment) if current is not None else None,
        "next": wire(where.next) if where.next is not None else None,
        "starts_in_s": _left(where.next.start, moment) if where.next is not None else None,
        "results_open": where.results_open,
        "schedule": [wire(p) for p in phases],
        "private_split": None
        if at is None
        else {
            "status": "revealed" if moment >= at else "sealed",
            "reveal_at": _iso(at),
            "final_leaderboard": "/v1/leaderboard/final",
        },
        "final_entries": {
            "max": settings.final_entries_max,
            "deadline": _iso(deadline) if deadline is not None else None,
            "open": deadline is None or moment < deadline,
            "default": "unmarked, an agent's best public results count (up to max)",
        },
    }
