"""Scoring-loop fixtures: a local-mode app with jobs (and optionally the verifier) enabled,
the example challenge from `examples/bucketsync-challenge` installed, and helpers to upload
submissions, launch jobs and wait for them — the real local job runner throughout."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TypeVar, cast

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.runners.base import JobRunner
from agenthub.bucketsync.settings import BucketSyncSettings
from agenthub.bucketsync.storage.base import Batch, BucketStore
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import ORG, World, make_settings
from tests.support.servers import live_server

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "bucketsync-challenge"
T = TypeVar("T")

FAST = {"JOBS_ENABLED": "true", "JOB_POLL_S": "0.05", "JOB_TIMEOUT_MINUTES": "1"}


def eventually(check: Callable[[], T | None], timeout: float = 45.0) -> T:
    """Poll `check` until it returns something truthy (jobs run in real subprocesses)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def tree(directory: Path) -> list[tuple[str, bytes]]:
    return [
        (path.relative_to(directory).as_posix(), path.read_bytes())
        for path in sorted(directory.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    ]


def install_challenge(store: BucketStore, settings: BucketSyncSettings) -> None:
    """What the organizer's bootstrap does: harness into the central bucket, the private
    eval set into the audit bucket."""
    store.write_batch(
        settings.central_bucket,
        Batch(adds=[(settings.harness_prefix + p, d) for p, d in tree(EXAMPLE / "harness")]),
    )
    store.write_batch(
        settings.audit_bucket,
        Batch(
            adds=[(settings.private_dataset_prefix + p, d) for p, d in tree(EXAMPLE / "private")]
        ),
    )


class ScoringWorld(World):
    def upload(self, agent_id: str, prefix: str, directory: Path) -> None:
        for path, data in tree(directory):
            assert self.put(agent_id, prefix + path, data).status_code == 201

    def submission(self, agent_id: str, kind: str = "good", prefix: str = "submission/") -> str:
        self.upload(agent_id, prefix, EXAMPLE / "submissions" / kind)
        return prefix

    def run_job(
        self,
        agent_id: str,
        *,
        sub: str = "submission/",
        run: str = "runs/1/",
        user: str | None = None,
    ) -> Any:
        owner = user or self._owner[agent_id]
        return self.client.post(
            "/v1/jobs:run",
            json={"agent_id": agent_id, "submission_prefix": sub, "run_prefix": run},
            headers=self.auth(owner),
        )

    def status(self, bucket: str, path: str) -> dict[str, Any] | None:
        data = self.hub.store.read(bucket, path)
        return json.loads(data) if data else None

    def finished(self, bucket: str, run: str) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            status = self.status(bucket, run + "job_status.json")
            return status if status and status.get("finished_at") else None

        return eventually(done)

    def result(self, agent_id: str, path: str, **fm: Any) -> Any:
        lines = "".join(f"{k}: {json.dumps(v)}\n" for k, v in fm.items())
        assert self.put(agent_id, path, f"---\n{lines}---\nrun notes\n").status_code == 201
        return self.client.post("/v1/results", json={"source": self.uri(agent_id, path)})

    def index(self) -> dict[str, str]:
        data = self.hub.store.read(self.hub.central, "results/verification_status.json")
        return json.loads(data) if data else {}


AppFactory = Callable[..., ScoringWorld]


@pytest.fixture
def scoring_world(tmp_path: Path) -> Iterator[AppFactory]:
    """`scoring_world(**env)` → a running ScoringWorld; apps are shut down at teardown."""
    clients: list[TestClient] = []

    def make(
        *,
        clock: FrozenClock | None = None,
        store: BucketStore | None = None,
        job_runner: JobRunner | None = None,
        data_dir: Path | None = None,
        **env: str,
    ) -> ScoringWorld:
        settings = make_settings(data_dir or tmp_path / "data", **{**FAST, **env})
        store = store or LocalBucketStore(settings.data_dir, clock=clock)
        identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
        app = create_app(
            settings, store=store, identity=identity, clock=clock, job_runner=job_runner
        )
        client = TestClient(app)
        client.__enter__()
        clients.append(client)
        install_challenge(store, settings)
        return ScoringWorld(client, app.state.hub, identity)

    yield make
    for client in clients:
        client.__exit__(None, None, None)


# A harness whose outcome the submission controls: it sleeps `sleep.txt` seconds, then
# scores `score.txt`, preferring `override.txt` when the submission has one.
SCORER = """
import argparse, json, pathlib, time
p = argparse.ArgumentParser()
p.add_argument("--submission-dir", type=pathlib.Path)
p.add_argument("--state-dir", type=pathlib.Path)
p.add_argument("--private-dir", type=pathlib.Path)
a, _ = p.parse_known_args()
sub = a.submission_dir
if (sub / "sleep.txt").exists():
    time.sleep(float((sub / "sleep.txt").read_text()))
name = "override.txt" if (sub / "override.txt").exists() else "score.txt"
(a.state_dir / "summary.json").write_text(json.dumps({"score": float((sub / name).read_text())}))
"""


def use_scorer(world: ScoringWorld) -> None:
    s = world.hub.settings
    world.hub.store.write_batch(
        s.central_bucket, Batch(adds=[(s.harness_prefix + "run.py", SCORER.encode())])
    )


@pytest.fixture
def live_world(tmp_path: Path) -> Iterator[Callable[..., tuple[ScoringWorld, FastAPI]]]:
    """`live_world(**env)` → (a ScoringWorld speaking real HTTP to a loopback server, its
    app); the scorer harness is installed."""
    stack = ExitStack()
    made: list[None] = []

    def make(**env: str) -> tuple[ScoringWorld, FastAPI]:
        made.append(None)
        settings = make_settings(tmp_path / f"live{len(made)}", **{**FAST, **env})
        store = LocalBucketStore(settings.data_dir)
        identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
        app = create_app(settings, store=store, identity=identity)
        base = stack.enter_context(live_server(app))
        client = stack.enter_context(httpx.Client(base_url=base, timeout=30))
        install_challenge(store, settings)
        # World drives its client through the httpx.Client API only, which TestClient extends.
        world = ScoringWorld(cast(TestClient, client), app.state.hub, identity)
        use_scorer(world)
        return world, app

    with stack:
        yield make
