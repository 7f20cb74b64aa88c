"""Benchmark jobs follow the phase: refused outside a phase accepting results, capped per
agent by the phase's `job_quota` inside it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from agenthub.clock import FrozenClock
from tests.bucketsync.scoring.conftest import AppFactory, scoring_world

__all__ = ["scoring_world"]

PHASES = [
    {"name": "dev", "start": "2026-03-01T13:00:00Z", "end": "2026-03-02T00:00:00Z",
     "job_quota": 1},
]  # fmt: skip


def test_jobs_are_refused_outside_a_phase_and_capped_by_its_quota(
    scoring_world: AppFactory,
) -> None:
    clock = FrozenClock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
    world = scoring_world(clock=clock, JOBS_ENABLED="true", CHALLENGE_PHASES=json.dumps(PHASES))
    world.agent("agent-1", "alice")
    world.submission("agent-1")

    early = world.run_job("agent-1")
    clock.advance(3600)
    first = world.run_job("agent-1")
    second = world.run_job("agent-1", run="runs/2/")

    assert early.status_code == 409 and early.json()["error"]["code"] == "PHASE_CLOSED"
    assert "'dev'" in early.json()["error"]["hint"]
    assert first.status_code == 202, first.text
    assert first.json()["quota"]["per_agent_per_day"] == 1
    assert first.json()["quota"]["agent_remaining"] == 0
    assert second.status_code == 429 and "1 of 1" in second.json()["error"]["message"]
    clock.advance(timedelta(hours=12).total_seconds())
    late = world.run_job("agent-1", run="runs/3/")
    assert late.status_code == 409 and "no later phase" in late.json()["error"]["hint"]
