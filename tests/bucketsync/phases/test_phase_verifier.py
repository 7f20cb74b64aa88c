"""The jobs verifier under a private split: every result is re-run (not only champions),
its private score is kept in the audit bucket, and neither the board post nor the
result's `verification_detail` shows a number of it before the reveal."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from agenthub.bucketsync.phases import private
from agenthub.clock import FrozenClock
from tests.bucketsync.phases.conftest import PHASES
from tests.bucketsync.scoring.conftest import AppFactory, ScoringWorld, eventually, scoring_world
from tests.bucketsync.scoring.test_verifier import promote, verifier_posts

__all__ = ["scoring_world"]


def both(world: ScoringWorld) -> list[str] | None:
    """The verifier's two board posts, once both are there."""
    found = [post["body"] for post in verifier_posts(world)]
    return found if len(found) == 2 else None


def test_every_result_is_rerun_and_its_private_score_stays_sealed(
    scoring_world: AppFactory,
) -> None:
    clock = FrozenClock(datetime(2026, 3, 1, 14, 0, tzinfo=UTC))
    world = scoring_world(
        clock=clock,
        JOBS_ENABLED="true",
        VERIFIER_ENABLED="true",
        VERIFIER_SCORE_TOL="100",
        CHALLENGE_PHASES=json.dumps(PHASES),
    )
    world.agent("agent-1", "alice")
    world.submission("agent-1", "good")
    sub = world.uri("agent-1", "submission/")
    best = promote(world, "agent-1", "results/r1.md", 0.9, artifacts=sub)
    eventually(lambda: world.index().get(best) == "valid")
    worse = promote(world, "agent-1", "results/r2.md", 0.5, artifacts=sub)  # no champion

    eventually(lambda: world.index().get(worse) == "valid")

    scores = private.scores(world.hub)
    assert set(scores) == {best, worse}
    rerun = scores[best]
    posts = eventually(lambda: both(world))
    assert all("re-run:" not in body for body in posts)
    assert all("sealed until the reveal" in body for body in posts)
    detail = world.client.get(f"/v1/results/{best}").json()["verification_detail"]
    assert detail["verdict"] == "valid"
    assert "rerun" not in detail and "deviation" not in detail
    assert str(rerun) not in world.client.get(f"/v1/results/{best}").text
