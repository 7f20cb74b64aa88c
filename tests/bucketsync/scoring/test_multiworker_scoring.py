"""Two real `agenthub bucketsync serve` processes on one data directory and one Redis,
with jobs and the verifier on (issue 29.3): verdicts committed by both at once are all in
the index, and concurrent job launches through both are each charged once in the quota
ledger and shown once on the scoring queue."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest

from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from tests.bucketsync.conftest import ORG, SLUG, make_settings
from tests.bucketsync.scoring.conftest import (
    SCORER,
    ScoringWorld,
    eventually,
    install_challenge,
)
from tests.bucketsync.scoring.test_pins import promote, submit
from tests.bucketsync.test_multiworker import SRC, serve
from tests.support.redisdb import drop_prefix, require_redis, unique_prefix

pytestmark = pytest.mark.redis

AUDIT = "acme-admin/chal-audit"
LEDGER = "quota/job_ledger.jsonl"
ROUNDS = 12
ENV = {
    "ORG": ORG,
    "COLLAB_SLUG": SLUG,
    "AUDIT_BUCKET": AUDIT,
    "JOBS_ENABLED": "true",
    "VERIFIER_ENABLED": "true",
    "VERIFIER_CONCURRENCY": "2",
    "JOB_POLL_S": "0.05",
    "JOB_TIMEOUT_MINUTES": "1",
    "JOB_PER_AGENT_PER_DAY": "10",
    "JOB_PER_USER_PER_DAY": "100",
}


@pytest.fixture
def two_workers(tmp_path: Path) -> Iterator[tuple[ScoringWorld, ScoringWorld]]:
    url = require_redis()
    prefix = unique_prefix()
    data = tmp_path / "data"
    env = {
        **os.environ,
        **ENV,
        "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "BUCKETSYNC_DATA_DIR": str(data),
        "BUCKETSYNC_BUS_URL": url,
        "BUCKETSYNC_BUS_PREFIX": prefix,
    }
    processes = []
    try:
        for name in ("a", "b"):
            process, base = serve(env, tmp_path / f"{name}.log")
            processes.append((process, base))
        settings = make_settings(data, **{k: v for k, v in ENV.items() if k != "ORG"})
        store = LocalBucketStore(data)
        install_challenge(store, settings)  # the example's private eval set, then our scorer
        store.write_batch(
            settings.central_bucket,
            Batch(adds=[(settings.harness_prefix + "run.py", SCORER.encode())]),
        )
        # The worlds read the stored files directly, as an organizer would.
        hub = cast(Hub, SimpleNamespace(store=store, central=settings.central_bucket))
        identity = LocalIdentity(data / "users.json", org=ORG)
        a, b = (
            ScoringWorld(httpx.Client(base_url=base, timeout=60), hub, identity)  # type: ignore[arg-type]
            for _process, base in processes
        )
        yield a, b
        a.client.close()
        b.client.close()
    finally:
        for process, _base in processes:
            process.terminate()
            try:
                process.wait(timeout=10)
            except Exception:
                process.kill()
        drop_prefix(url, prefix)


def share(a: ScoringWorld, b: ScoringWorld, *agents: str) -> None:
    for agent in agents:
        a.agent(agent, f"user-{agent}")
    b.tokens, b._owner = a.tokens, a._owner


def ledger(world: ScoringWorld, filename: str) -> dict[str, Any] | None:
    return world.status(AUDIT, f"verification_ledger/{filename}/verdict.json")


def test_verdicts_committed_by_two_serve_processes_at_once_are_all_kept(
    two_workers: tuple[ScoringWorld, ScoringWorld],
) -> None:
    a, b = two_workers
    share(a, b, "agent-1", "agent-2")
    decided: list[str] = []
    for n in range(ROUNDS):
        # Each round beats the last round's champion, so both results are re-run, on both
        # workers at once (two verifier slots), and their verdicts committed together.
        low, high = round(0.10 + 0.02 * n, 2), round(0.11 + 0.02 * n, 2)
        submit(a, "agent-1", f"sub{n}/", **{"score.txt": str(low)})
        submit(b, "agent-2", f"sub{n}/", **{"score.txt": str(high)})
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(promote, a, "agent-1", f"results/r{n}.md", low, f"sub{n}/")
            second = pool.submit(promote, b, "agent-2", f"results/r{n}.md", high, f"sub{n}/")
            pair = [first.result(), second.result()]
        for filename in pair:
            eventually(lambda f=filename: (ledger(a, f) or {}).get("announced"), timeout=30)  # type: ignore[misc]
        decided += pair
        index = a.index()
        lost = [f for f in decided if index.get(f) != "valid"]
        assert lost == [], f"round {n}: told valid, index shows {[index.get(f) for f in lost]}"
    for world in (a, b):  # and both workers show every one as valid
        shown = {f: world.client.get(f"/v1/results/{f}").json()["verification"] for f in decided}
        assert set(shown.values()) == {"valid"}, shown


def test_job_launches_through_two_serve_processes_are_charged_and_queued_once(
    two_workers: tuple[ScoringWorld, ScoringWorld],
) -> None:
    a, b = two_workers
    share(a, b, "agent-3")
    submit(a, "agent-3", "submission/", **{"score.txt": "0.5"})
    with ThreadPoolExecutor(20) as pool:
        answers = list(
            pool.map(lambda i: (a if i % 2 else b).run_job("agent-3", run=f"runs/{i}/"), range(20))
        )
    codes = sorted(r.status_code for r in answers)
    assert codes == [202] * 10 + [429] * 10, [r.text for r in answers if r.status_code >= 500]
    launched = {r.json()["job_id"] for r in answers if r.status_code == 202}
    data = a.hub.store.read(AUDIT, LEDGER) or b""
    rows = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
    assert sorted(row["job_id"] for row in rows) == sorted(launched)  # each charged once

    def ended() -> list[dict[str, Any]] | None:
        view = a.client.get("/v1/queue").json()
        agent_runs = [e for e in view["recent"] if e["kind"] == "agent"]
        return agent_runs if not view["running"] and len(agent_runs) >= 10 else None

    runs = eventually(ended, timeout=60)
    assert sorted(e["job_id"] for e in runs) == sorted(launched)  # each queued, and ended, once
