"""`GET /v1/queue` over real HTTP with the local job runner: positions and ETAs while three
verifications wait, the queue block of `GET /v1/results/{filename}`, and a verifier that
stopped (cleanly, or silently) shown as stopped."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.scoring.queue import estimate
from agenthub.bucketsync.scoring.verifier import Verifier
from agenthub.bucketsync.storage.local import LocalBucketStore
from tests.bucketsync.conftest import ORG, make_settings
from tests.bucketsync.scoring.conftest import (
    FAST,
    ScoringWorld,
    eventually,
    install_challenge,
    use_scorer,
)
from tests.bucketsync.scoring.test_pins import detail, promote, submit
from tests.support.servers import live_server

LiveWorld = Callable[..., tuple[ScoringWorld, FastAPI]]


def verifier(app: FastAPI) -> Verifier:
    found = app.state.scoring.verifier
    assert isinstance(found, Verifier)
    return found


def queue(world: ScoringWorld) -> dict[str, Any]:
    response = world.client.get("/v1/queue")
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_three_waiting_verifications_have_positions_and_etas(live_world: LiveWorld) -> None:
    world, _app = live_world(VERIFIER_ENABLED="true", VERIFIER_HEARTBEAT_S="0.5")
    agents = [world.agent(f"agent-{n}", f"user-{n}") for n in range(5)]
    # One finished verification gives the ETA its first duration sample.
    submit(world, agents[0], "sub/", **{"score.txt": "0.5", "sleep.txt": "0.5"})
    first = promote(world, agents[0], "results/r.md", 0.5, "sub/")
    eventually(lambda: world.index().get(first) == "valid")
    # The verdict is written first, then the run leaves the queue with its duration.
    median = eventually(lambda: queue(world)["durations"]["verification"]["median_s"])
    assert median > 0.5

    submit(world, agents[1], "sub/", **{"score.txt": "0.6", "sleep.txt": "6"})
    running = promote(world, agents[1], "results/r.md", 0.6, "sub/")
    eventually(lambda: queue(world)["running"])
    waiting = []
    for n, agent in enumerate(agents[2:], 2):
        submit(world, agent, "sub/", **{"score.txt": f"0.{5 + n}"})
        waiting.append(promote(world, agent, "results/r.md", 0.5 + n / 10, "sub/"))
        eventually(lambda: len(queue(world)["queue"]) == len(waiting))  # in promotion order

    view = queue(world)
    assert view["verifier"]["status"] == "running" and view["verifier"]["concurrency"] == 1
    assert [(e["result"], e["position"]) for e in view["queue"]] == [
        (waiting[0], 1),
        (waiting[1], 2),
        (waiting[2], 3),
    ]
    assert all(e["state"] == "queued" and e["attempt"] == 0 for e in view["queue"])
    assert all(e["queued_at"] and e["started_at"] is None for e in view["queue"])
    [now_running] = [e for e in view["running"] if e["kind"] == "verification"]
    assert now_running["result"] == running and now_running["started_at"]
    assert now_running["attempt"] == 1 and now_running["position"] == 0
    etas = [now_running["eta_s"]] + [e["eta_s"] for e in view["queue"]]
    # Each waiting one ends one median after the one before it (one slot).
    assert [b - a for a, b in pairwise(etas)] == pytest.approx([median] * 3, abs=0.01)
    assert all(e["eta_at"] for e in view["queue"])

    own = detail(world, waiting[1])["verification_detail"]
    assert own["state"] == "queued" and own["queue"]["position"] == 2

    eventually(lambda: all(world.index().get(f) == "valid" for f in waiting), timeout=60)
    eventually(lambda: queue(world)["durations"]["verification"]["samples"] == 5)
    assert queue(world)["queue"] == []


def test_a_stopped_verifier_shows_as_stopped(live_world: LiveWorld) -> None:
    world, app = live_world(VERIFIER_ENABLED="true", VERIFIER_HEARTBEAT_S="0.2")
    eventually(lambda: queue(world)["verifier"]["status"] == "running")
    verifier(app).stop()
    view = queue(world)["verifier"]
    assert view["status"] == "stopped" and view["heartbeat_at"]


def test_a_verifier_that_died_silently_goes_stale(live_world: LiveWorld) -> None:
    world, app = live_world(VERIFIER_ENABLED="true", VERIFIER_HEARTBEAT_S="0.2")
    eventually(lambda: queue(world)["verifier"]["status"] == "running")
    verifier(app)._stop.set()  # the loop ends without its last word, as a crash would
    view = eventually(lambda: (v := queue(world)["verifier"])["status"] == "stopped" and v)
    assert view["heartbeat_age_s"] > view["stale_after_s"] == pytest.approx(0.6)


def test_the_queue_is_404_without_jobs(live_world: LiveWorld) -> None:
    world, _app = live_world(JOBS_ENABLED="false")
    response = world.client.get("/v1/queue")
    assert response.status_code == 404 and response.json()["error"]["code"] == "JOBS_DISABLED"


def test_without_verifier_the_queue_says_disabled(live_world: LiveWorld) -> None:
    world, _app = live_world()
    assert queue(world)["verifier"]["status"] == "disabled"


def test_eta_is_unknown_without_samples_and_fills_free_slots_first() -> None:
    assert estimate([1.0], 2, None, 1) == ([None], [None, None])
    ends, waits = estimate([1.0], 3, 4.0, 2)  # one of two slots busy for 3 more seconds
    assert ends == [3.0] and waits == [4.0, 7.0, 8.0]


def test_a_restarted_server_adopts_the_run_its_predecessor_was_watching(tmp_path: Path) -> None:
    env = {**FAST, "VERIFIER_ENABLED": "true", "VERIFIER_HEARTBEAT_S": "0.2"}
    settings = make_settings(tmp_path / "data", **env)
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    first = create_app(settings, store=LocalBucketStore(settings.data_dir), identity=identity)
    with live_server(first) as base, httpx.Client(base_url=base, timeout=30) as client:
        install_challenge(first.state.hub.store, settings)
        world = ScoringWorld(cast(TestClient, client), first.state.hub, identity)
        use_scorer(world)
        world.agent("agent-1", "alice")
        submit(world, "agent-1", "sub/", **{"score.txt": "0.5", "sleep.txt": "2"})
        filename = promote(world, "agent-1", "results/r.md", 0.5, "sub/")
        running = eventually(lambda: queue(world)["running"])
    # The first server is gone (its watcher with it); the run goes on without it.
    assert world.index() == {filename: "pending"}  # entered at promotion, not yet decided
    second = create_app(settings, store=LocalBucketStore(settings.data_dir), identity=identity)
    with live_server(second) as base, httpx.Client(base_url=base, timeout=30) as client:
        world = ScoringWorld(cast(TestClient, client), second.state.hub, identity)
        eventually(lambda: world.index().get(filename) == "valid", timeout=30)
        view = eventually(lambda: (v := queue(world))["recent"] and v)
        assert view["running"] == [] and view["queue"] == []
        assert [r["job_id"] for r in view["recent"]] == [running[0]["job_id"]]  # not re-run
