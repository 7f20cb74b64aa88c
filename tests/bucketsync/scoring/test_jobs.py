"""Benchmark jobs (BS-4.19, 4.41-4.51, 1.25, 5.7, 8.6) with the real local job runner."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agenthub.bucketsync.core.locks import Lease, Unfenced
from agenthub.bucketsync.errors import StorageUnavailable
from agenthub.bucketsync.runners.base import JobSpec, LaunchedJob
from agenthub.bucketsync.runners.local import LocalJobRunner
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.scoring.conftest import AppFactory, ScoringWorld, eventually

LEDGER = "quota/job_ledger.jsonl"
AUDIT = "acme-admin/chal-audit"

PROBE = """
import argparse, json, os, pathlib, sys, time
p = argparse.ArgumentParser()
p.add_argument("--submission-dir", type=pathlib.Path)
p.add_argument("--state-dir", type=pathlib.Path)
p.add_argument("--private-dir", type=pathlib.Path)
a, extra = p.parse_known_args()
mode = (a.submission_dir / "mode.txt").read_text().strip()
if mode == "sleep":
    time.sleep(60)
if mode == "slow":
    time.sleep(1.5)
if mode == "symlink":
    (a.state_dir / "leak.txt").symlink_to(pathlib.Path(a.submission_dir).parent.parent / "spec.json")
if mode == "crash":
    print("harness crashed on purpose")
    sys.exit(3)
(a.submission_dir / "mode.txt").write_text("tampered by the job")
(a.state_dir / "summary.json").write_text(json.dumps({
    "score": 0.5, "env": sorted(os.environ), "extra": extra,
    "private": a.private_dir is not None,
}))
"""


def use_probe(world: ScoringWorld) -> None:
    s = world.hub.settings
    world.hub.store.write_batch(
        s.central_bucket, Batch(adds=[(s.harness_prefix + "run.py", PROBE.encode())])
    )


def probe_submission(world: ScoringWorld, agent: str, mode: str) -> str:
    assert world.put(agent, "probe/mode.txt", mode).status_code == 201
    return "probe/"


def ledger_rows(world: ScoringWorld) -> list[dict[str, Any]]:
    data = world.hub.store.read(AUDIT, LEDGER) or b""
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


def test_bs_4_19_bs_4_51_job_launches_and_reports_when_done(scoring_world: AppFactory) -> None:
    world = scoring_world()
    world.agent("agent-1", "alice")
    world.submission("agent-1")
    response = world.run_job("agent-1")
    assert response.status_code == 202, response.text
    body = response.json()
    bucket = world.bucket("agent-1")
    assert body["job_id"].startswith("local-") and body["job_url"]
    assert body["status_file"] == f"hf://buckets/{bucket}/runs/1/job_status.json"
    assert body["logs_file"] == f"hf://buckets/{bucket}/runs/1/job_logs.txt"
    assert body["quota"]["agent_remaining"] == 9 and body["quota"]["user_remaining"] == 29
    assert body["timeout_minutes"] == 1 and body["message"]
    status = world.finished(bucket, "runs/1/")
    assert status["stage"] == "COMPLETED" and status["job_id"] == body["job_id"]
    assert status["submission"] == f"hf://buckets/{bucket}/submission/"
    logs = world.hub.store.read(bucket, "runs/1/job_logs.txt")
    assert logs is not None and b'"score": 1.0' in logs


def test_bs_4_50_harness_writes_summary_with_the_score_field(scoring_world: AppFactory) -> None:
    world = scoring_world()
    world.agent("agent-1", "alice")
    world.submission("agent-1", "naive")
    assert world.run_job("agent-1").status_code == 202
    world.finished(world.bucket("agent-1"), "runs/1/")
    summary = world.status(world.bucket("agent-1"), "runs/1/summary.json")
    assert summary is not None and summary["score"] == pytest.approx(0.706667)
    assert summary["eval_set"] == "public"


def test_bs_4_19_jobs_run_is_listed_when_enabled(scoring_world: AppFactory) -> None:
    world = scoring_world()
    described = world.client.get("/v1").json()
    assert "/v1/jobs:run" in [e["path"] for e in described["endpoints"]]
    assert described["jobs"]["harness"] == "hf://buckets/acme/chal-main-bucket/harness/run.py"
    assert described["jobs"]["per_agent_per_day"] == 10


def test_bs_4_49_local_sandbox_copies_are_removed_after_the_run(
    scoring_world: AppFactory, tmp_path: Path
) -> None:
    world = scoring_world()
    world.agent("agent-1", "alice")
    world.submission("agent-1")
    job_id = world.run_job("agent-1").json()["job_id"]
    world.finished(world.bucket("agent-1"), "runs/1/")
    job_dir = tmp_path / "data" / "jobs" / job_id
    assert (job_dir / "status.json").exists() and (job_dir / "logs.txt").exists()
    assert not (job_dir / "sandbox").exists()


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("submission_prefix", "../other/", "INVALID_PATH"),
        ("run_prefix", "runs/.hidden/", "INVALID_PATH"),
        ("run_prefix", "/abs/", "INVALID_PATH"),
        ("submission_prefix", "nothing-here/", "SOURCE_NOT_FOUND"),
    ],
)
def test_bs_4_41_prefixes_are_validated(
    scoring_world: AppFactory, field: str, value: str, code: str
) -> None:
    world = scoring_world()
    world.agent("agent-1", "alice")
    world.submission("agent-1")
    body = {"agent_id": "agent-1", "submission_prefix": "submission/", "run_prefix": "runs/1/"}
    response = world.client.post(
        "/v1/jobs:run", json={**body, field: value}, headers=world.auth("alice")
    )
    assert response.json()["error"]["code"] == code
    assert ledger_rows(world) == []


def test_bs_4_41_body_shape_is_checked(scoring_world: AppFactory) -> None:
    world = scoring_world()
    world.agent("agent-1", "alice")
    response = world.client.post(
        "/v1/jobs:run", json={"agent_id": "agent-1"}, headers=world.auth("alice")
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_REQUEST"


def test_bs_4_42_per_call_proof(scoring_world: AppFactory) -> None:
    world = scoring_world()
    world.agent("agent-1", "alice")
    world.submission("agent-1")
    world.user("bob")
    no_token = world.client.post(
        "/v1/jobs:run",
        json={"agent_id": "agent-1", "submission_prefix": "submission/", "run_prefix": "r/"},
    )
    assert no_token.status_code == 401 and no_token.json()["error"]["code"] == "UNAUTHORIZED"
    unknown = world.run_job("agent-9", user="alice")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "NOT_REGISTERED"
    bystander = world.run_job("agent-1", user="bob")
    assert bystander.status_code == 403
    assert bystander.json()["error"]["code"] == "BUCKET_NOT_OWNED_BY_CALLER"
    # The handshake names bob now, but agent-1 is bound to alice forever.
    assert world.put("agent-1", ".bucket-sync-handshake", "bob").status_code == 201
    mismatch = world.run_job("agent-1", user="bob")
    assert mismatch.status_code == 403 and mismatch.json()["error"]["code"] == "IDENTITY_MISMATCH"
    assert ledger_rows(world) == []


def test_bs_4_43_bs_5_7_agent_quota_over_a_sliding_day(scoring_world: AppFactory) -> None:
    clock = FrozenClock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
    world = scoring_world(clock=clock, JOB_PER_AGENT_PER_DAY="2")
    world.agent("agent-1", "alice")
    world.submission("agent-1")
    assert world.run_job("agent-1", run="runs/1/").status_code == 202
    clock.advance(3600)
    assert world.run_job("agent-1", run="runs/2/").status_code == 202
    clock.advance(600)
    refused = world.run_job("agent-1", run="runs/3/")
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "RATE_LIMITED"
    # The oldest launch ages out 24h after it started: 24h - 1h10m from now.
    assert int(refused.headers["Retry-After"]) == 24 * 3600 - 4200
    clock.advance(24 * 3600 - 4200)
    assert world.run_job("agent-1", run="runs/3/").status_code == 202


def test_bs_5_7_user_quota_spans_their_agents(scoring_world: AppFactory) -> None:
    world = scoring_world(JOB_PER_USER_PER_DAY="2")
    for agent in ("agent-1", "agent-2", "agent-3"):
        world.agent(agent, "alice")
        world.submission(agent)
    assert world.run_job("agent-1").status_code == 202
    assert world.run_job("agent-2").status_code == 202
    refused = world.run_job("agent-3")
    assert refused.status_code == 429 and "user 'alice'" in refused.json()["error"]["message"]


def test_bs_1_25_bs_8_6_ledger_lives_in_the_audit_bucket_and_survives_restart(
    scoring_world: AppFactory, tmp_path: Path
) -> None:
    world = scoring_world(JOB_PER_AGENT_PER_DAY="1")
    world.agent("agent-1", "alice")
    world.submission("agent-1")
    launched = world.run_job("agent-1").json()
    rows = ledger_rows(world)
    assert [(r["agent_id"], r["hf_user"], r["job_id"]) for r in rows] == [
        ("agent-1", "alice", launched["job_id"])
    ]
    restarted = scoring_world(JOB_PER_AGENT_PER_DAY="1")  # same data dir, fresh process state
    restarted.tokens = world.tokens
    restarted._owner = world._owner
    assert restarted.run_job("agent-1", run="runs/2/").status_code == 429


class SlowLaunch:
    """The real local runner, but the launch takes a while (as on a busy platform)."""

    def __init__(self, inner: LocalJobRunner, delay: float) -> None:
        self.inner, self.delay, self.launches = inner, delay, 0
        self._lock = threading.Lock()

    def launch(self, spec: JobSpec) -> LaunchedJob:
        threading.Event().wait(self.delay)
        with self._lock:
            self.launches += 1
        return self.inner.launch(spec)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class NoLock:
    def hold(self) -> AbstractContextManager[Lease]:
        return nullcontext(Unfenced("job-quota"))


def _burst(world: ScoringWorld, count: int) -> list[int]:
    with ThreadPoolExecutor(count) as pool:
        responses = list(
            pool.map(lambda i: world.run_job("agent-1", run=f"runs/{i}/"), range(count))
        )
    return [r.status_code for r in responses]


def test_bs_4_44_twenty_concurrent_launches_start_exactly_ten(
    scoring_world: AppFactory, tmp_path: Path
) -> None:
    runner = SlowLaunch(LocalJobRunner(tmp_path / "data"), 0.05)
    world = scoring_world(job_runner=runner)
    world.agent("agent-1", "alice")
    world.submission("agent-1")
    codes = _burst(world, 20)
    assert sorted(codes) == [202] * 10 + [429] * 10
    assert runner.launches == 10 and len(ledger_rows(world)) == 10


def test_bs_4_44_without_the_lock_the_quota_overshoots(
    scoring_world: AppFactory, tmp_path: Path
) -> None:
    from agenthub.bucketsync.scoring.quota import JobQuota

    runner = SlowLaunch(LocalJobRunner(tmp_path / "data"), 0.3)
    world = scoring_world(job_runner=runner)
    scoring = world.client.app.state.scoring  # type: ignore[attr-defined]
    quota: JobQuota = scoring.jobs.quota
    quota.lock = NoLock()
    world.agent("agent-1", "alice")
    world.submission("agent-1")
    codes = _burst(world, 20)
    assert codes.count(202) > 10  # the broken variant double-spends


class FailingLedgerStore(LocalBucketStore):
    def __init__(self, *args: Any, fail_read: bool = False, fail_write: bool = False, **kw: Any):
        super().__init__(*args, **kw)
        self.fail_read, self.fail_write = fail_read, fail_write

    def read(self, bucket: str, path: str) -> bytes | None:
        if self.fail_read and path == LEDGER:
            raise StorageUnavailable("audit bucket unreachable")
        return super().read(bucket, path)

    def write_batch(self, bucket: str, batch: Batch) -> None:
        if self.fail_write and any(path == LEDGER for path, _ in batch.adds):
            raise StorageUnavailable("audit bucket unreachable")
        super().write_batch(bucket, batch)

    def read_many(self, bucket: str, paths: Sequence[str]) -> dict[str, bytes]:
        return super().read_many(bucket, paths)


def test_bs_4_45_bs_6_11_unreadable_ledger_is_503_and_nothing_launched(
    scoring_world: AppFactory, tmp_path: Path
) -> None:
    store = FailingLedgerStore(tmp_path / "data", fail_read=True)
    runner = SlowLaunch(LocalJobRunner(tmp_path / "data"), 0)
    world = scoring_world(store=store, job_runner=runner)
    world.agent("agent-1", "alice")
    world.submission("agent-1")
    response = world.run_job("agent-1")
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "QUOTA_BACKEND_UNAVAILABLE"
    assert "Retry-After" in response.headers
    assert runner.launches == 0


def test_bs_4_45_failed_ledger_write_after_launch_is_not_fatal_and_still_counts(
    scoring_world: AppFactory, tmp_path: Path
) -> None:
    store = FailingLedgerStore(tmp_path / "data", fail_write=True)
    world = scoring_world(store=store, JOB_PER_AGENT_PER_DAY="1")
    world.agent("agent-1", "alice")
    world.submission("agent-1")
    assert world.run_job("agent-1").status_code == 202
    assert world.run_job("agent-1", run="runs/2/").status_code == 429
    store.fail_write = False
    world.agent("agent-2", "alice")
    world.submission("agent-2")
    assert world.run_job("agent-2").status_code == 202
    assert {r["agent_id"] for r in ledger_rows(world)} == {"agent-1", "agent-2"}


def test_bs_4_46_bs_6_10_launch_failure_is_502_and_not_counted(
    scoring_world: AppFactory, tmp_path: Path
) -> None:
    broken = LocalJobRunner(tmp_path / "data", python=str(tmp_path / "no-such-python"))
    world = scoring_world(job_runner=broken, JOB_PER_AGENT_PER_DAY="1")
    world.agent("agent-1", "alice")
    world.submission("agent-1")
    response = world.run_job("agent-1")
    assert response.status_code == 502 and response.json()["error"]["code"] == "JOB_LAUNCH_FAILED"
    assert ledger_rows(world) == []


def test_bs_4_47_bs_4_49_harness_contract_mounts_and_no_token(
    scoring_world: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_secret_admin_token")
    world = scoring_world(JOB_EXTRA_ARGS="--level hard")
    use_probe(world)
    world.agent("agent-1", "alice")
    sub = probe_submission(world, "agent-1", "probe")
    assert world.run_job("agent-1", sub=sub).status_code == 202
    bucket = world.bucket("agent-1")
    assert world.finished(bucket, "runs/1/")["stage"] == "COMPLETED"
    summary = world.status(bucket, "runs/1/summary.json")
    assert summary is not None
    assert summary["extra"] == ["--level", "hard"] and summary["private"] is False
    assert not [k for k in summary["env"] if "TOKEN" in k or k.startswith("BUCKETSYNC")]
    # /submission is read-only: what the job wrote there never reaches the bucket.
    assert world.hub.store.read(bucket, "probe/mode.txt") == b"probe"
    spec = world.client.app.state.scoring.jobs.spec([], private=True, labels={})  # type: ignore[attr-defined]
    assert spec.command[:6] == (
        "python3",
        "/harness/run.py",
        "--submission-dir",
        "/submission",
        "--state-dir",
        "/state",
    )
    assert spec.command[6:] == ("--private-dir", "/private", "--level", "hard")
    harness = spec.mounts[0]
    assert (harness.bucket, harness.prefix, harness.mount_path, harness.read_only) == (
        "acme/chal-main-bucket",
        "harness/",
        "/harness",
        True,
    )


def test_bs_4_48_platform_timeout_ends_the_job(scoring_world: AppFactory) -> None:
    world = scoring_world(JOB_TIMEOUT_MINUTES="0.02")  # 1 s
    use_probe(world)
    world.agent("agent-1", "alice")
    sub = probe_submission(world, "agent-1", "sleep")
    assert world.run_job("agent-1", sub=sub).status_code == 202
    status = world.finished(world.bucket("agent-1"), "runs/1/")
    assert status["stage"] == "ERROR" and "timed out" in status["message"]


def test_bs_4_48_watcher_cancels_a_job_past_timeout_and_grace(scoring_world: AppFactory) -> None:
    clock = FrozenClock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
    world = scoring_world(clock=clock, JOB_CANCEL_GRACE_S="30")
    use_probe(world)
    world.agent("agent-1", "alice")
    sub = probe_submission(world, "agent-1", "sleep")
    job_id = world.run_job("agent-1", sub=sub).json()["job_id"]
    runner = world.client.app.state.scoring.jobs.runner  # type: ignore[attr-defined]
    eventually(lambda: runner.inspect(job_id).stage == "RUNNING")
    clock.advance(60 + 30 + 1)
    status = world.finished(world.bucket("agent-1"), "runs/1/")
    assert status["stage"] == "CANCELED" and "watcher" in status["message"]
    assert runner.inspect(job_id).stage == "CANCELED"


def test_bs_4_51_crashing_job_is_reported_with_its_logs(scoring_world: AppFactory) -> None:
    world = scoring_world()
    use_probe(world)
    world.agent("agent-1", "alice")
    sub = probe_submission(world, "agent-1", "crash")
    assert world.run_job("agent-1", sub=sub).status_code == 202
    status = world.finished(world.bucket("agent-1"), "runs/1/")
    assert status["stage"] == "ERROR" and "status 3" in status["message"]
    logs = world.hub.store.read(world.bucket("agent-1"), "runs/1/job_logs.txt")
    assert logs is not None and b"crashed on purpose" in logs


def test_bs_4_49_symlinks_in_state_are_not_copied_back(scoring_world: AppFactory) -> None:
    world = scoring_world()
    use_probe(world)
    world.agent("agent-1", "alice")
    sub = probe_submission(world, "agent-1", "symlink")
    assert world.run_job("agent-1", sub=sub).status_code == 202
    bucket = world.bucket("agent-1")
    assert world.finished(bucket, "runs/1/")["stage"] == "COMPLETED"
    assert world.hub.store.read(bucket, "runs/1/summary.json") is not None
    assert world.hub.store.read(bucket, "runs/1/leak.txt") is None


def test_bs_4_51_restart_mid_run_then_reconcile_finishes_the_status_once(
    scoring_world: AppFactory, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from agenthub.cli import app as cli

    world = scoring_world()
    use_probe(world)
    world.agent("agent-1", "alice")
    sub = probe_submission(world, "agent-1", "slow")
    job_id = world.run_job("agent-1", sub=sub).json()["job_id"]
    world.client.__exit__(None, None, None)  # the Space restarts; its watcher is gone
    runner = LocalJobRunner(tmp_path / "data")
    eventually(lambda: runner.inspect(job_id).terminal)
    bucket = world.bucket("agent-1")
    unfinished = world.status(bucket, "runs/1/job_status.json")
    assert unfinished is not None and unfinished["finished_at"] is None
    env = {
        "ORG": "acme",
        "COLLAB_SLUG": "chal",
        "AUDIT_BUCKET": AUDIT,
        "BUCKETSYNC_DATA_DIR": str(tmp_path / "data"),
        "JOBS_ENABLED": "true",
    }
    outputs = []
    for _ in range(2):
        result = CliRunner().invoke(cli, ["bucketsync", "verify", "reconcile"], env=env)
        assert result.exit_code == 0, result.output
        outputs.append(result.stdout)
    assert "agent runs: finished 1" in outputs[0] and "agent runs: finished 0" in outputs[1]
    status = world.status(bucket, "runs/1/job_status.json")
    assert status is not None and status["stage"] == "COMPLETED" and status["finished_at"]
    assert world.hub.store.read(bucket, "runs/1/job_logs.txt") is not None


def test_bs_4_47_relative_data_dir_still_runs_the_harness(
    scoring_world: AppFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BUCKETSYNC_DATA_DIR defaults to a relative path (./var/bucketsync)."""
    monkeypatch.chdir(tmp_path)
    world = scoring_world(data_dir=Path("relative-data"))
    world.agent("agent-1", "alice")
    world.submission("agent-1")
    assert world.run_job("agent-1").status_code == 202
    assert world.finished(world.bucket("agent-1"), "runs/1/")["stage"] == "COMPLETED"
