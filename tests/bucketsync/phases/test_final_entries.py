"""Final entries: up to FINAL_ENTRIES_MAX of an agent's own results, changed only before
the deadline, every change audited; unmarked, the best public results count."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from agenthub.clock import FrozenClock
from tests.bucketsync.phases.conftest import (
    DEV_START,
    REVEAL,
    PhaseWorld,
    make_world,
    phase_settings,
)


@pytest.fixture
def three(phase_world: PhaseWorld) -> tuple[PhaseWorld, list[str]]:
    phase_world.agent("ada")
    phase_world.at(DEV_START)
    return phase_world, [phase_world.result("ada", s) for s in (0.5, 0.6, 0.7)]


def test_an_agent_marks_up_to_the_limit_and_the_next_mark_is_refused(
    three: tuple[PhaseWorld, list[str]],
) -> None:
    world, (a, b, c) = three
    assert world.final("ada", a).json()["marked"] == [a]
    assert world.final("ada", b).json()["marked"] == [a, b]

    refused = world.final("ada", c)

    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "FINAL_ENTRIES_LIMIT" and "2 of 2" in error["message"]
    assert f"DELETE /v1/results/{a}:final" in error["hint"]
    assert world.client.get("/v1/finals/ada").json() == {
        "agent": "ada",
        "marked": [a, b],
        "max": 2,
        "selection": "marked",
    }


def test_marking_twice_changes_nothing_and_unmarking_frees_a_place(
    three: tuple[PhaseWorld, list[str]],
) -> None:
    world, (a, b, c) = three
    world.final("ada", a)
    world.final("ada", b)

    again = world.final("ada", a).json()
    unmarked = world.final("ada", a, mark=False).json()
    third = world.final("ada", c)

    assert again["changed"] is False and again["marked"] == [a, b]
    assert unmarked["changed"] is True and unmarked["marked"] == [b]
    assert third.status_code == 200 and third.json()["marked"] == [b, c]


def test_only_the_author_marks_a_result(three: tuple[PhaseWorld, list[str]]) -> None:
    world, (a, _b, _c) = three
    world.agent("bob")
    world.result("bob", 0.4)

    response = world.final("bob", a)

    assert response.status_code == 403 and response.json()["error"]["code"] == "FORBIDDEN"
    assert "ada's result" in response.json()["error"]["message"]
    missing = world.final("ada", "20260301-130000-000_ada.md")
    assert missing.status_code == 404


def test_every_change_is_audited(three: tuple[PhaseWorld, list[str]]) -> None:
    world, (a, b, _c) = three
    world.final("ada", a)
    world.final("ada", b)
    world.final("ada", b)  # no change: no row
    world.final("ada", a, mark=False)

    rows = [r for r in world.hub.audit.rows("202603") if ":final" in str(r["route"])]

    assert [(r["result"], r["before"], r["after"]) for r in rows] == [
        (a, [], [a]),
        (b, [a], [a, b]),
        (a, [a, b], [b]),
    ]
    assert {r["target_path"] for r in rows} == {"final_entries/ada.json"}


def test_the_selection_locks_at_the_deadline(three: tuple[PhaseWorld, list[str]]) -> None:
    world, (a, b, _c) = three
    world.final("ada", a)
    world.at(REVEAL)

    for mark in (True, False):
        response = world.final("ada", b if mark else a, mark=mark)
        assert response.status_code == 409
        assert response.json()["error"]["code"] == "PHASE_CLOSED"
        assert "2026-03-03T00:00:00Z" in response.json()["error"]["message"]
    assert world.client.get("/v1/finals/ada").json()["marked"] == [a]


def test_the_limit_is_a_challenge_setting(tmp_path: Path) -> None:
    clock = FrozenClock(datetime(2026, 3, 1, 13, 0, tzinfo=UTC))
    worlds = make_world(phase_settings(tmp_path / "data", FINAL_ENTRIES_MAX="1"), clock)
    world = next(worlds)
    world.agent("ada")
    a, b = world.result("ada", 0.5), world.result("ada", 0.6)

    world.final("ada", a)
    refused = world.final("ada", b)

    assert refused.json()["error"]["code"] == "FINAL_ENTRIES_LIMIT"
    assert world.client.get("/v1").json()["phase"]["final_entries"]["max"] == 1
    worlds.close()


def test_unmarked_the_best_public_results_count(three: tuple[PhaseWorld, list[str]]) -> None:
    world, (_a, b, c) = three
    world.evaluate()
    world.at(REVEAL)

    (row,) = world.client.get("/v1/leaderboard/final").json()["rows"]

    assert row["entries"] == [c, b] and row["selection"] == "best_public"
    assert world.client.get("/v1/finals/ada").json()["selection"] == "best_public"
