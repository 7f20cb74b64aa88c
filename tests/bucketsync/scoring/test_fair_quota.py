"""Fair quotas over real HTTP with the local job runner: a run the platform killed is not
charged and is relaunched, a run the harness failed is charged, and `GET /v1/me/quota`
gives the caller's and each of their agents' runs left and when the next frees up."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from fastapi import FastAPI

from tests.bucketsync.scoring.conftest import ScoringWorld, eventually
from tests.bucketsync.scoring.test_pins import submit

LiveWorld = Callable[..., tuple[ScoringWorld, FastAPI]]
AUDIT = "acme-admin/chal-audit"
LEDGER = "quota/job_ledger.jsonl"


def ledger_rows(world: ScoringWorld) -> list[dict[str, Any]]:
    data = world.hub.store.read(AUDIT, LEDGER) or b""
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


def kill_supervisor(world: ScoringWorld, job_id: str) -> None:
    """What the platform does when it loses a machine: the run dies with no word from it."""
    job_dir = world.hub.settings.data_dir / "jobs" / job_id
    pid = eventually(lambda: (job_dir / "pid").exists() and int((job_dir / "pid").read_text()))
    os.killpg(pid, signal.SIGKILL)


def quota(world: ScoringWorld, user: str) -> dict[str, Any]:
    response = world.client.get("/v1/me/quota", headers=world.auth(user))
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_a_run_the_platform_killed_is_not_charged_and_is_retried(live_world: LiveWorld) -> None:
    world, _app = live_world()
    world.agent("agent-1", "alice")
    submit(world, "agent-1", "sub/", **{"score.txt": "0.7", "sleep.txt": "1.5"})
    launched = world.run_job("agent-1", sub="sub/", run="runs/1/")
    assert launched.status_code == 202, launched.text
    first = launched.json()["job_id"]
    kill_supervisor(world, first)

    bucket = world.bucket("agent-1")
    status = eventually(
        lambda: (
            (s := world.status(bucket, "runs/1/job_status.json"))
            and s.get("finished_at")
            and s["job_id"] != first
            and s
        )
    )
    assert status["stage"] == "COMPLETED" and status["attempt"] == 2
    assert status["reason"] is None and status["charged"] is True
    assert status["previous_attempts"] == [first]
    assert world.status(bucket, "runs/1/summary.json") == {"score": 0.7}
    rows = ledger_rows(world)
    assert [(r["job_id"] == first, r.get("charging", True), r.get("reason")) for r in rows] == [
        (True, False, "platform_error"),
        (False, True, None),
    ]
    assert rows[1]["attempt"] == 2
    mine = quota(world, "alice")
    assert mine["agents"][0]["used"] == 1 and mine["agents"][0]["not_charged"] == 1
    assert mine["agents"][0]["remaining"] == 9 and mine["user"]["remaining"] == 29
    # The run leaves the queue just after its status is written.
    recent = eventually(lambda: world.client.get("/v1/queue").json()["recent"])
    assert [(r["job_id"], r["reason"]) for r in recent] == [(status["job_id"], None)]


def test_a_run_the_harness_failed_is_charged_and_not_retried(live_world: LiveWorld) -> None:
    world, _app = live_world()
    world.agent("agent-1", "alice")
    submit(world, "agent-1", "sub/", **{"sleep.txt": "0"})  # no score.txt: the harness fails
    assert world.run_job("agent-1", sub="sub/", run="runs/1/").status_code == 202
    status = world.finished(world.bucket("agent-1"), "runs/1/")
    assert status["stage"] == "ERROR" and status["reason"] == "harness_error"
    assert status["charged"] is True and status["attempt"] == 1
    [row] = ledger_rows(world)
    assert "charging" not in row
    assert quota(world, "alice")["agents"][0]["used"] == 1


def test_platform_failures_stop_being_retried_after_the_budget(live_world: LiveWorld) -> None:
    world, _app = live_world(JOB_PLATFORM_RETRIES="1")
    world.agent("agent-1", "alice")
    submit(world, "agent-1", "sub/", **{"score.txt": "0.7", "sleep.txt": "30"})
    first = world.run_job("agent-1", sub="sub/", run="runs/1/").json()["job_id"]
    kill_supervisor(world, first)
    bucket = world.bucket("agent-1")
    retry = eventually(
        lambda: (
            (s := world.status(bucket, "runs/1/job_status.json"))
            and s["job_id"] != first
            and s["job_id"]
        )
    )
    kill_supervisor(world, str(retry))
    status = eventually(
        lambda: (
            (s := world.status(bucket, "runs/1/job_status.json"))
            and s["job_id"] == retry
            and s.get("finished_at")
            and s
        )
    )
    assert status["reason"] == "platform_error" and status["charged"] is False
    # The ledger is told right after the status is written.
    eventually(lambda: [r.get("charging", True) for r in ledger_rows(world)] == [False, False])
    assert quota(world, "alice")["agents"][0] == pytest.approx(
        {
            "agent_id": "agent-1",
            "used": 0,
            "limit": 10,
            "remaining": 10,
            "not_charged": 2,
            "next_free_at": None,
            "next_free_in_s": None,
        }
    )


def test_my_quota_lists_each_agent_and_when_the_next_run_frees_up(
    live_world: LiveWorld,
) -> None:
    world, _app = live_world(JOB_PER_AGENT_PER_DAY="2", JOB_PER_USER_PER_DAY="3")
    world.agent("agent-1", "alice")
    world.agent("agent-2", "alice")
    world.agent("agent-3", "bob")
    for agent in ("agent-1", "agent-2"):
        submit(world, agent, "sub/", **{"score.txt": "0.5"})
    before = datetime.now().astimezone()
    assert world.run_job("agent-1", sub="sub/", run="runs/1/").status_code == 202
    assert world.run_job("agent-1", sub="sub/", run="runs/2/").status_code == 202
    mine = quota(world, "alice")
    assert [a["agent_id"] for a in mine["agents"]] == ["agent-1", "agent-2"]
    one, two = mine["agents"]
    assert (one["used"], one["remaining"], two["used"], two["remaining"]) == (2, 0, 0, 2)
    assert mine["user"] == pytest.approx(
        {**mine["user"], "hf_user": "alice", "used": 2, "remaining": 1, "limit": 3}
    )
    frees = datetime.fromisoformat(one["next_free_at"].replace("Z", "+00:00"))
    assert (
        before + timedelta(hours=24) <= frees <= datetime.now().astimezone() + timedelta(hours=24)
    )
    assert 24 * 3600 - 60 < one["next_free_in_s"] <= 24 * 3600
    assert two["next_free_at"] is None
    assert quota(world, "bob")["agents"][0]["agent_id"] == "agent-3"
    over = world.run_job("agent-1", sub="sub/", run="runs/3/")
    assert over.status_code == 429


def test_my_quota_needs_a_bearer_token(live_world: LiveWorld) -> None:
    world, _app = live_world()
    response = world.client.get("/v1/me/quota")
    assert response.status_code == 401 and response.json()["error"]["code"] == "UNAUTHORIZED"
