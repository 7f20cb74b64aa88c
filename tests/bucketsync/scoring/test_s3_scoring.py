"""The scoring loop on S3 (`BUCKETSYNC_STORAGE=s3`, moto's server on loopback): agents'
jobs and the verifier run on the local job runner, whose supervisor copies mounts out of
the S3 bucket and writes the job's /state back into it; the quota ledger, the scoring queue
and the verification index are edited by compare-and-swap (`core.shared`), with no lock."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.s3 import S3BucketStore
from tests.bucketsync.conftest import ORG, make_settings
from tests.bucketsync.scoring.conftest import (
    FAST,
    ScoringWorld,
    eventually,
    install_challenge,
    use_scorer,
)
from tests.bucketsync.scoring.test_pins import promote, submit
from tests.support.s3server import S3Server, running_s3


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with running_s3() as server:
        yield server


@pytest.fixture
def s3_world(s3: S3Server, tmp_path: Path) -> Iterator[ScoringWorld]:
    env = {**FAST, **s3.env(s3.new_bucket()), "VERIFIER_ENABLED": "true"}
    settings = make_settings(tmp_path / "data", **env, VERIFIER_HEARTBEAT_S="0.2")
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(settings, identity=identity)
    assert isinstance(app.state.hub.store, S3BucketStore) and app.state.hub.swaps
    with TestClient(app) as client:
        install_challenge(app.state.hub.store, settings)
        world = ScoringWorld(client, app.state.hub, identity)
        use_scorer(world)
        yield world


def test_an_agents_job_runs_on_s3_and_is_charged_in_the_ledger(s3_world: ScoringWorld) -> None:
    world = s3_world
    world.agent("agent-1", "alice")
    submit(world, "agent-1", "sub/", **{"score.txt": "0.25"})
    launched = world.run_job("agent-1", sub="sub/", run="runs/1/")
    assert launched.status_code == 202, launched.text
    assert launched.json()["quota"]["agent_remaining"] == 9
    bucket = world.hub.settings.scratch_bucket("agent-1")
    status = world.finished(bucket, "runs/1/")
    assert status["stage"] == "COMPLETED", status
    # /state came back from the job into the S3 bucket.
    summary = world.hub.store.read(bucket, "runs/1/summary.json")
    assert summary is not None and json.loads(summary)["score"] == 0.25
    s = world.hub.settings
    ledger = world.hub.store.read(s.audit_bucket, s.job_quota_ledger_path)
    rows = [json.loads(line) for line in (ledger or b"").decode().splitlines()]
    assert [r["job_id"] for r in rows] == [launched.json()["job_id"]]  # no reservation left


def test_the_verifier_scores_a_champion_on_s3(s3_world: ScoringWorld) -> None:
    world = s3_world
    world.agent("agent-1", "alice")
    submit(world, "agent-1", "sub/", **{"score.txt": "0.5"})
    filename = promote(world, "agent-1", "results/r.md", 0.5, "sub/")
    eventually(lambda: world.index().get(filename) == "valid", timeout=60)
    # The verdict is written before the run leaves the queue.
    queue: dict[str, Any] = eventually(
        lambda: (q := world.client.get("/v1/queue").json())["recent"] and q
    )
    assert queue["running"] == [] and queue["queue"] == []
    assert [r["result"] for r in queue["recent"]] == [filename]
    board = world.client.get("/v1/messages").json()["items"]
    assert any("valid" in world.client.get(f"/v1/messages/{name}").text for name in board), (
        "the verdict was announced on the board"
    )
