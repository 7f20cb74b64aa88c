"""Phases under a moved clock: results refused outside an open phase with a hint naming
the next one, the schedule in GET /v1 and the digest, one event per phase change."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agenthub.bucketsync.phases import announce
from agenthub.bucketsync.settings import Phase, SettingsError, check_phases
from agenthub.bucketsync.storage.base import Batch
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import World, make_settings
from tests.bucketsync.phases.conftest import (
    DEV_END,
    DEV_START,
    RESULT,
    REVEAL,
    PhaseWorld,
    make_world,
    phase_settings,
)


def phase_events(world: World) -> list[dict[str, object]]:
    page = world.client.get(
        "/v1/landscape", params={"kind": "phase:changed", "expand": "true"}
    ).json()
    return list(page["items"])


def test_a_result_before_the_first_phase_is_refused_naming_the_next_phase(
    phase_world: PhaseWorld,
) -> None:
    phase_world.agent("ada")
    phase_world.put("ada", "results/r.md", RESULT)

    response = phase_world.client.post(
        "/v1/results", json={"source": phase_world.uri("ada", "results/r.md")}
    )

    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "PHASE_CLOSED"
    assert "'dev'" in error["hint"] and "2026-03-01T13:00:00Z" in error["hint"]
    assert "in 3600s" in error["hint"]
    assert phase_world.client.get("/v1/results").json()["count"] == 0


def test_results_are_accepted_while_the_phase_is_open_and_refused_after_it(
    phase_world: PhaseWorld,
) -> None:
    phase_world.agent("ada")
    phase_world.at(DEV_START)
    phase_world.result("ada", 0.5)
    phase_world.at(DEV_END - timedelta(milliseconds=1))
    phase_world.result("ada", 0.6)

    phase_world.at(DEV_END)
    phase_world.put("ada", "results/late.md", RESULT)
    late = phase_world.client.post(
        "/v1/results", json={"source": phase_world.uri("ada", "results/late.md")}
    )

    assert late.status_code == 409 and late.json()["error"]["code"] == "PHASE_CLOSED"
    assert "'final'" in late.json()["error"]["hint"]
    assert "accepts no results" in late.json()["error"]["hint"]
    assert phase_world.client.get("/v1/results").json()["count"] == 2


def test_after_the_last_phase_the_hint_says_results_are_closed_for_good(
    phase_world: PhaseWorld,
) -> None:
    phase_world.agent("ada")
    phase_world.at(datetime(2026, 4, 1, tzinfo=UTC))
    phase_world.put("ada", "results/r.md", RESULT)

    response = phase_world.client.post(
        "/v1/results", json={"source": phase_world.uri("ada", "results/r.md")}
    )

    assert response.json()["error"]["code"] == "PHASE_CLOSED"
    assert "no later phase" in response.json()["error"]["hint"]


def test_get_v1_and_the_digest_announce_the_current_phase_and_the_time_left(
    phase_world: PhaseWorld,
) -> None:
    phase_world.at(DEV_START + timedelta(hours=1))

    described = phase_world.client.get("/v1").json()
    digest = phase_world.client.get("/v1/digest").json()

    assert described["feature_level"] >= 9
    for phase in (described["phase"], digest["phase"]):
        assert phase["current"]["name"] == "dev" and phase["results_open"] is True
        assert phase["time_left_s"] == 10 * 3600
        assert phase["next"]["name"] == "final" and phase["starts_in_s"] == 34 * 3600
        assert phase["private_split"]["status"] == "sealed"
        assert phase["final_entries"] == {
            "max": 2,
            "deadline": "2026-03-03T00:00:00Z",
            "open": True,
            "default": "unmarked, an agent's best public results count (up to max)",
        }
    assert digest["final_leaderboard"] is None
    assert phase_world.client.get("/v1/phases").json()["phase"] == described["phase"]


def test_without_phases_nothing_changes(world: World) -> None:
    world.agent("ada")
    world.put("ada", "results/r.md", RESULT)

    promoted = world.client.post("/v1/results", json={"source": world.uri("ada", "results/r.md")})

    assert promoted.status_code == 201
    assert world.client.get("/v1").json()["phase"] is None
    digest = world.client.get("/v1/digest").json()
    assert "phase" not in digest and "final_leaderboard" not in digest
    assert phase_events(world) == []
    final = world.client.get("/v1/leaderboard/final").json()
    assert final["status"] == "sealed" and final["rows"] == []
    marked = world.client.post(
        f"/v1/results/{promoted.json()['filename']}:final",
        json={"source": world.uri("ada", "results/r.md")},
    )
    assert marked.status_code == 409 and marked.json()["error"]["code"] == "PHASE_CLOSED"


def test_a_phase_change_is_announced_once_by_the_first_request_after_it(
    phase_world: PhaseWorld,
) -> None:
    phase_world.agent("ada")
    assert phase_events(phase_world) == []  # before 13:00 nothing has happened

    phase_world.at(DEV_START)
    phase_world.client.get("/v1")
    phase_world.client.get("/v1/digest")
    events = phase_events(phase_world)

    assert len(events) == 1
    fm = events[0]["frontmatter"]
    assert isinstance(fm, dict)
    assert fm["phase"]["changes"] == [
        {"phase": "dev", "change": "opened", "at": "2026-03-01T13:00:00Z"}
    ]
    assert fm["phase"]["current"] == "dev"
    updates = phase_world.client.get("/v1/updates", params={"as": "ada", "expand": "true"}).json()
    assert [item["reasons"] for item in updates["items"]] == [["phase:changed"]]


def test_boundaries_passed_together_make_one_event_in_time_order(
    phase_world: PhaseWorld,
) -> None:
    phase_world.at(REVEAL + timedelta(minutes=5))

    phase_world.client.get("/v1/healthz")

    (event,) = phase_events(phase_world)
    fm = event["frontmatter"]
    assert isinstance(fm, dict)
    assert [(c["phase"], c["change"]) for c in fm["phase"]["changes"]] == [
        ("dev", "opened"),
        ("dev", "closed"),
        ("final", "opened"),
    ]
    assert fm["phase"]["private_split"] == "revealed"
    assert "GET /v1/leaderboard/final" in str(event["body"])


def test_a_second_worker_does_not_announce_a_change_again(tmp_path: Path) -> None:
    settings = phase_settings(tmp_path / "data")
    clock = FrozenClock(DEV_START + timedelta(seconds=1))
    first = make_world(settings, clock)
    world = next(first)
    world.client.get("/v1")
    second = make_world(settings, clock)
    other = next(second)

    assert announce.due(other.hub)  # this worker has not seen it announced...
    assert announce.observe(other.hub) is None  # ...but the ledger says it was
    other.hub.read_model.invalidate("events/")
    assert len(phase_events(other)) == 1

    # The broken variant: without the audit-bucket ledger a third worker announces again.
    other.hub.store.write_batch(settings.audit_bucket, Batch(deletes=[announce.LEDGER]))
    third = make_world(settings, clock)
    again = next(third)
    assert announce.observe(again.hub) is not None
    again.hub.read_model.invalidate("events/")
    assert len(phase_events(again)) == 2
    third.close()
    for generator in (second, first):
        generator.close()


def test_phases_must_not_overlap_nor_end_before_they_start(tmp_path: Path) -> None:
    a = Phase(name="a", start=DEV_START, end=DEV_END)
    b = Phase(name="b", start=DEV_END - timedelta(hours=1), end=REVEAL)
    with pytest.raises(ValueError, match="overlap"):
        check_phases([a, b])
    with pytest.raises(SettingsError, match="ends before it starts"):
        make_settings(
            tmp_path,
            CHALLENGE_PHASES='[{"name":"x","start":"2026-01-02T00:00:00Z",'
            '"end":"2026-01-01T00:00:00Z"}]',
        )
