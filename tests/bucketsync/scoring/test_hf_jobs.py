"""The HF Jobs adapter through the real huggingface_hub client against the Hub emulator,
and `jobs:run` end to end on the hf adapters (BS-4.47-4.49, 4.51, 4.46)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.hf import HfIdentity
from agenthub.bucketsync.runners.base import JobRunnerUnavailable, JobSpec, Mount
from agenthub.bucketsync.runners.hf import HfJobRunner
from agenthub.bucketsync.storage.hf import HfBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import make_settings
from tests.bucketsync.scoring.conftest import eventually
from tests.support.hub_emulator import Fault, HubEmulator, running_hub

CENTRAL = "acme/chal-main-bucket"
AUDIT = "acme-admin/chal-audit"


@pytest.fixture
def hub() -> Iterator[HubEmulator]:
    with running_hub() as emulator:
        emulator.add_bucket(CENTRAL, author="acme")
        emulator.add_bucket(AUDIT, author="acme-admin", private=True)
        emulator.put(CENTRAL, "harness/run.py", b"print('harness')\n")
        yield emulator


def implicit_whoami(hub: HubEmulator) -> list[object]:
    """whoami calls made with the runner's token: what a Jobs call without `namespace`
    would cost (the callers' own whoami carry their tokens)."""
    return [r for r in hub.requests if r.route == "whoami" and r.token == "hf_admin"]


def runner_on(hub: HubEmulator) -> HfJobRunner:
    return HfJobRunner(token="hf_admin", namespace="acme", endpoint=hub.url, deadline_s=3)


def spec() -> JobSpec:
    return JobSpec(
        command=("python3", "/harness/run.py"),
        mounts=(
            Mount(CENTRAL, "harness/", "/harness", read_only=True),
            Mount("acme/chal-a1", "runs/1/", "/state", read_only=False),
        ),
        image="python:3.12",
        flavor="cpu-basic",
        timeout_s=600,
        labels={"agent": "a1"},
    )


def test_bs_4_49_launch_mounts_bucket_volumes_with_explicit_namespace(hub: HubEmulator) -> None:
    runner = runner_on(hub)
    job = runner.launch(spec())
    assert job.job_id == hub.jobs.ids[0] and job.url.endswith(f"/jobs/acme/{job.job_id}")
    launch = next(r for r in hub.requests if r.route == "job_run")
    call = json.loads(launch.body)
    assert launch.path == "/api/jobs/acme" and launch.token == "hf_admin"
    assert call["dockerImage"] == "python:3.12" and call["flavor"] == "cpu-basic"
    assert call["timeoutSeconds"] == 600 and call["command"] == ["python3", "/harness/run.py"]
    assert not call["environment"] and "secrets" not in call  # no token enters the container
    assert hub.jobs.jobs[job.job_id]["volumes"] == [
        {
            "type": "bucket",
            "source": CENTRAL,
            "mountPath": "/harness",
            "readOnly": True,
            "path": "harness",
        },
        {
            "type": "bucket",
            "source": "acme/chal-a1",
            "mountPath": "/state",
            "readOnly": False,
            "path": "runs/1",
        },
    ]
    assert runner.inspect(job.job_id).stage == "RUNNING"
    runner.cancel(job.job_id)
    assert runner.inspect(job.job_id).stage == "CANCELED"
    assert not implicit_whoami(hub)


def test_bs_4_46_refused_launch_and_outage_are_translated(hub: HubEmulator) -> None:
    from agenthub.bucketsync.runners.base import JobLaunchError

    runner = runner_on(hub)
    refusal = hub.inject("job_run", Fault.status(402))
    with pytest.raises(JobLaunchError, match="402"):
        runner.launch(spec())
    hub.remove(refusal)
    job = runner.launch(spec())
    with hub.refusing(), pytest.raises(JobRunnerUnavailable):
        runner.inspect(job.job_id)
    hub.inject("job_logs", Fault.hang())
    with pytest.raises(JobRunnerUnavailable):
        runner.logs(job.job_id)


def hf_app_parts(hub: HubEmulator, clock: FrozenClock) -> dict[str, object]:
    return {
        "store": HfBucketStore(token="hf_admin", endpoint=hub.url),
        "identity": HfIdentity(
            admin_token="hf_admin", endpoint=hub.url, clock=clock, email_lookup=lambda *a: []
        ),
        "clock": clock,
        "job_runner": runner_on(hub),
    }


@pytest.fixture
def hf_client(hub: HubEmulator, tmp_path: Path) -> Iterator[tuple[TestClient, FrozenClock]]:
    hub.accounts.add_user("tok-alice", "alice", acme="contributor")
    hub.add_bucket("acme/chal-a1", author="alice")
    hub.put("acme/chal-a1", ".bucket-sync-handshake", b"alice")
    hub.put("acme/chal-a1", "sub/predict.py", b"def predict(n): return True\n")
    clock = FrozenClock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
    settings = make_settings(
        tmp_path,
        BUCKETSYNC_STORAGE="hf",
        HF_TOKEN="hf_admin",
        JOBS_ENABLED="true",
        JOB_POLL_S="0.02",
    )
    app = create_app(settings, **hf_app_parts(hub, clock))  # type: ignore[arg-type]
    with TestClient(app) as client:
        auth = {"Authorization": "Bearer tok-alice"}
        registered = client.post("/v1/agents/register", json={"agent_id": "a1"}, headers=auth)
        assert registered.status_code == 201, registered.text
        yield client, clock


def run(client: TestClient) -> dict[str, str]:
    response = client.post(
        "/v1/jobs:run",
        json={"agent_id": "a1", "submission_prefix": "sub/", "run_prefix": "runs/1/"},
        headers={"Authorization": "Bearer tok-alice"},
    )
    assert response.status_code == 202, response.text
    return dict(response.json())


def test_bs_4_51_jobs_run_on_hf_writes_status_and_logs_when_the_job_ends(
    hub: HubEmulator, hf_client: tuple[TestClient, FrozenClock]
) -> None:
    client, _clock = hf_client
    body = run(client)
    job_id = hub.jobs.ids[0]
    assert body["job_url"] == f"{hub.url}/jobs/acme/{job_id}"
    volumes = hub.jobs.volumes(job_id)
    assert volumes["/submission"] == {
        "type": "bucket",
        "source": "acme/chal-a1",
        "mountPath": "/submission",
        "readOnly": True,
        "path": "sub",
    }
    assert volumes["/state"]["readOnly"] is False and volumes["/harness"]["readOnly"] is True
    hub.jobs.complete(job_id, {"score": 0.5})
    files = eventually(
        lambda: (
            ("runs/1/job_logs.txt" in hub.files("acme/chal-a1") and hub.files("acme/chal-a1"))
            or None
        )
    )
    assert b'"stage": "COMPLETED"' in files["runs/1/job_status.json"]
    assert b'{"score": 0.5}' in files["runs/1/job_logs.txt"]
    assert files["runs/1/summary.json"] == b'{"score": 0.5}'
    assert not implicit_whoami(hub)


def test_bs_4_48_watcher_cancels_an_overrunning_hf_job(
    hub: HubEmulator, hf_client: tuple[TestClient, FrozenClock]
) -> None:
    client, clock = hf_client
    run(client)
    job_id = hub.jobs.ids[0]
    eventually(lambda: hub.jobs.stage(job_id) == "RUNNING")
    clock.advance(30 * 60 + 60 + 1)
    eventually(lambda: hub.count("job_cancel") == 1)
    assert [r.path for r in hub.requests if r.route == "job_cancel"] == [
        f"/api/jobs/acme/{job_id}/cancel"
    ]
    eventually(
        lambda: b'"CANCELED"' in hub.files("acme/chal-a1").get("runs/1/job_status.json", b"")
    )


def test_bs_4_46_hf_launch_refusal_is_502_and_not_counted(
    hub: HubEmulator, hf_client: tuple[TestClient, FrozenClock]
) -> None:
    client, _clock = hf_client
    hub.inject("job_run", Fault.status(402))
    response = client.post(
        "/v1/jobs:run",
        json={"agent_id": "a1", "submission_prefix": "sub/", "run_prefix": "runs/1/"},
        headers={"Authorization": "Bearer tok-alice"},
    )
    assert response.status_code == 502 and response.json()["error"]["code"] == "JOB_LAUNCH_FAILED"
    assert "quota/job_ledger.jsonl" not in hub.files(AUDIT)


def test_bs_4_53_verifier_on_hf_mounts_the_private_set_from_the_audit_bucket(
    hub: HubEmulator, tmp_path: Path
) -> None:
    hub.put(AUDIT, "private/eval.json", b"[[2, true]]")
    hub.accounts.add_user("tok-alice", "alice", acme="contributor")
    hub.add_bucket("acme/chal-a1", author="alice")
    hub.put("acme/chal-a1", ".bucket-sync-handshake", b"alice")
    hub.put("acme/chal-a1", "sub/predict.py", b"def predict(n): return True\n")
    hub.put(
        "acme/chal-a1",
        "r.md",
        b"---\nscore: 0.8\nmethod: m\nstatus: agent-run\ndescription: d\nartifacts: sub/\n---\n",
    )
    clock = FrozenClock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
    settings = make_settings(
        tmp_path,
        BUCKETSYNC_STORAGE="hf",
        HF_TOKEN="hf_admin",
        JOBS_ENABLED="true",
        VERIFIER_ENABLED="true",
        JOB_POLL_S="0.02",
    )
    app = create_app(settings, **hf_app_parts(hub, clock))  # type: ignore[arg-type]
    with TestClient(app) as client:
        auth = {"Authorization": "Bearer tok-alice"}
        assert client.post("/v1/agents/register", json={"agent_id": "a1"}, headers=auth).is_success
        promoted = client.post("/v1/results", json={"source": "hf://buckets/acme/chal-a1/r.md"})
        assert promoted.status_code == 201, promoted.text
        filename = promoted.json()["filename"]
        eventually(lambda: bool(hub.jobs.ids))
        job_id = hub.jobs.ids[0]
        volumes = hub.jobs.volumes(job_id)
        assert volumes["/private"] == {
            "type": "bucket",
            "source": AUDIT,
            "mountPath": "/private",
            "readOnly": True,
            "path": "private",
        }
        assert volumes["/state"]["source"] == AUDIT and volumes["/state"]["readOnly"] is False
        assert volumes["/state"]["path"] == f"verification_runs/{filename}"
        # The run mounts the pinned copy, made by xet hash from the agent's bucket.
        assert volumes["/submission"]["source"] == AUDIT
        assert volumes["/submission"]["path"] == f"verification_submissions/{filename}"
        copies = [
            op for batch in hub.batch_operations(AUDIT) for op in batch if op["type"] == "copyFile"
        ]
        assert copies and all(op["sourceRepoId"] == "acme/chal-a1" for op in copies)
        assert "--private-dir" in hub.jobs.jobs[job_id]["command"]
        hub.jobs.complete(job_id, {"score": 0.79})
        # The index says "pending" while the run goes, then the verdict.
        eventually(
            lambda: (
                json.loads(hub.files(CENTRAL).get("results/verification_status.json", b"{}")).get(
                    filename
                )
                == "valid"
            )
        )
