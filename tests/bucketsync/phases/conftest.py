"""A challenge with phases: `dev` (results, public split) from 13:00 on the clock's first
day to midnight, a gap, then `final` (no results, the private split revealed) — and an
evaluator whose private score is the submission's `private.txt`."""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.settings import BucketSyncSettings
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.challenge.evaluate import EvalLoop
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import ORG, World, make_settings

DEV_START = datetime(2026, 3, 1, 13, 0, tzinfo=UTC)
DEV_END = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)
REVEAL = datetime(2026, 3, 3, 0, 0, tzinfo=UTC)
FINAL_END = datetime(2026, 3, 10, 0, 0, tzinfo=UTC)

# A result file any agent may promote.
RESULT = "---\nscore: 1\nmethod: m\nstatus: agent-run\ndescription: d\n---\n"

PHASES = [
    {"name": "dev", "start": "2026-03-01T13:00:00Z", "end": "2026-03-02T00:00:00Z"},
    {
        "name": "final",
        "start": "2026-03-03T00:00:00Z",
        "end": "2026-03-10T00:00:00Z",
        "results": False,
        "split": "private",
    },
]


def phase_settings(data_dir: Path, **overrides: Any) -> BucketSyncSettings:
    return make_settings(
        data_dir,
        CHALLENGE_PHASES=json.dumps(PHASES),
        VERIFIER_SCORE_TOL="100",  # the private split may differ from the public one
        **overrides,
    )


class PhaseWorld(World):
    clock: FrozenClock

    def at(self, moment: datetime) -> None:
        self.clock.advance((moment - self.clock.now()).total_seconds())

    def result(self, agent_id: str, score: float, private: float | None = None) -> str:
        """Promote a result scoring `score` whose submission scores `private` privately."""
        n = len(self.client.get("/v1/results", params={"agent": agent_id}).json()["items"])
        folder = f"sub-{n}/"
        assert self.put(agent_id, f"{folder}private.txt", str(private or score)).status_code == 201
        path = f"results/r{n}.md"
        text = (
            f"---\nscore: {score}\nmethod: m{n}\nstatus: agent-run\ndescription: d{n}\n"
            f"artifacts: {folder}\n---\nnotes\n"
        )
        assert self.put(agent_id, path, text).status_code == 201
        response = self.client.post("/v1/results", json={"source": self.uri(agent_id, path)})
        assert response.status_code == 201, response.text
        return str(response.json()["filename"])

    def evaluate(self) -> dict[str, str]:
        """One eval-space pass: every pending result scored on its private.txt."""
        return EvalLoop(self.hub, private_score).run_once().outcomes

    def final(self, agent_id: str, filename: str, *, mark: bool = True) -> Any:
        source = {"source": self.uri(agent_id, "results/r0.md")}  # any file of its bucket
        method = "POST" if mark else "DELETE"
        return self.client.request(method, f"/v1/results/{filename}:final", json=source)


def private_score(submission_dir: Path, private_dir: Path) -> Mapping[str, Any]:
    return {"score": float((submission_dir / "private.txt").read_text())}


def make_world(
    settings: BucketSyncSettings, clock: FrozenClock
) -> Generator[PhaseWorld, None, None]:
    store = LocalBucketStore(settings.data_dir, clock=clock)
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(settings, store=store, identity=identity, clock=clock)
    with TestClient(app) as client:
        # The private eval set the evaluator insists on (its content is not used here).
        if store.info(settings.audit_bucket) is None:
            store.create(settings.audit_bucket, creator="bucket-sync", private=True)
        store.write_batch(
            settings.audit_bucket, Batch(adds=[(f"{settings.private_dataset_prefix}x", b"1")])
        )
        world = PhaseWorld(client, app.state.hub, identity)
        world.clock = clock
        yield world


@pytest.fixture
def phase_world(tmp_path: Path) -> Iterator[PhaseWorld]:
    clock = FrozenClock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
    yield from make_world(phase_settings(tmp_path / "data"), clock)
