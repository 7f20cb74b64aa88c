"""The HF Jobs adapter against a recording fake at the huggingface_hub boundary, and
`jobs:run` end to end on the hf adapters (BS-4.47-4.49, 4.51, 4.46)."""

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
from tests.bucketsync.hf_fake import FakeHub
from tests.bucketsync.scoring.conftest import eventually
from tests.bucketsync.scoring.hf_jobs_fake import FakeJobsHub

CENTRAL = "acme/chal-main-bucket"
AUDIT = "acme-admin/chal-audit"


@pytest.fixture
def fake() -> FakeJobsHub:
    buckets = FakeHub()
    buckets.add_bucket(CENTRAL, author="acme")
    buckets.add_bucket(AUDIT, author="acme-admin", private=True)
    buckets.put(CENTRAL, "harness/run.py", b"print('harness')\n")
    return FakeJobsHub(buckets)


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


def test_bs_4_49_launch_mounts_bucket_volumes_with_explicit_namespace(fake: FakeJobsHub) -> None:
    runner = HfJobRunner(token="hf_admin", namespace="acme", api=fake)
    job = runner.launch(spec())
    assert job.job_id == "job0001" and job.url.endswith("/jobs/acme/job0001")
    name, call = fake.calls[0]
    assert name == "run_job" and call["namespace"] == "acme" and call["token"] == "hf_admin"
    assert call["image"] == "python:3.12" and call["flavor"] == "cpu-basic"
    assert call["timeout"] == 600 and call["command"] == ["python3", "/harness/run.py"]
    assert "env" not in call and "secrets" not in call  # no token enters the container
    assert fake.jobs["job0001"]["volumes"] == [
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
    assert runner.inspect("job0001").stage == "RUNNING"
    runner.cancel("job0001")
    assert runner.inspect("job0001").stage == "CANCELED"
    assert ("whoami", {}) not in fake.calls


def test_bs_4_46_refused_launch_and_outage_are_translated(fake: FakeJobsHub) -> None:
    from agenthub.bucketsync.runners.base import JobLaunchError

    runner = HfJobRunner(token="hf_admin", namespace="acme", api=fake)
    fake.refuse_launch = True
    with pytest.raises(JobLaunchError, match="402"):
        runner.launch(spec())
    fake.refuse_launch = False
    runner.launch(spec())
    fake.down = True
    with pytest.raises(JobRunnerUnavailable):
        runner.inspect("job0001")


@pytest.fixture
def hf_client(fake: FakeJobsHub, tmp_path: Path) -> Iterator[tuple[TestClient, FrozenClock]]:
    fake.buckets.tokens["tok-alice"] = {
        "name": "alice",
        "orgs": [{"name": "acme", "roleInOrg": "contributor"}],
    }
    fake.buckets.add_bucket("acme/chal-a1", author="alice")
    fake.buckets.put("acme/chal-a1", ".bucket-sync-handshake", b"alice")
    fake.buckets.put("acme/chal-a1", "sub/predict.py", b"def predict(n): return True\n")
    clock = FrozenClock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
    settings = make_settings(
        tmp_path,
        BUCKETSYNC_STORAGE="hf",
        HF_TOKEN="hf_admin",
        JOBS_ENABLED="true",
        JOB_POLL_S="0.02",
    )
    app = create_app(
        settings,
        store=HfBucketStore(token="hf_admin", api=fake),
        identity=HfIdentity(
            admin_token="hf_admin", api=fake.buckets, clock=clock, email_lookup=lambda *a: []
        ),
        clock=clock,
        job_runner=HfJobRunner(token="hf_admin", namespace="acme", api=fake),
    )
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
    fake: FakeJobsHub, hf_client: tuple[TestClient, FrozenClock]
) -> None:
    client, _clock = hf_client
    body = run(client)
    assert body["job_url"] == "https://huggingface.co/jobs/acme/job0001"
    volumes = {v["mountPath"]: v for v in fake.jobs["job0001"]["volumes"]}
    assert volumes["/submission"] == {
        "type": "bucket",
        "source": "acme/chal-a1",
        "mountPath": "/submission",
        "readOnly": True,
        "path": "sub",
    }
    assert volumes["/state"]["readOnly"] is False and volumes["/harness"]["readOnly"] is True
    fake.complete("job0001", {"score": 0.5})
    files = eventually(
        lambda: (
            (
                "runs/1/job_logs.txt" in fake.buckets.files("acme/chal-a1")
                and fake.buckets.files("acme/chal-a1")
            )
            or None
        )
    )
    assert b'"stage": "COMPLETED"' in files["runs/1/job_status.json"]
    assert b'{"score": 0.5}' in files["runs/1/job_logs.txt"]
    assert files["runs/1/summary.json"] == b'{"score": 0.5}'
    assert ("whoami", {}) not in fake.calls


def test_bs_4_48_watcher_cancels_an_overrunning_hf_job(
    fake: FakeJobsHub, hf_client: tuple[TestClient, FrozenClock]
) -> None:
    client, clock = hf_client
    run(client)
    eventually(lambda: fake.jobs["job0001"]["stage"] == "RUNNING")
    clock.advance(30 * 60 + 60 + 1)
    eventually(lambda: ("cancel_job", {"job_id": "job0001", "namespace": "acme"}) in fake.calls)
    status = eventually(lambda: fake.buckets.files("acme/chal-a1").get("runs/1/job_status.json"))
    assert b'"CANCELED"' in status


def test_bs_4_46_hf_launch_refusal_is_502_and_not_counted(
    fake: FakeJobsHub, hf_client: tuple[TestClient, FrozenClock]
) -> None:
    client, _clock = hf_client
    fake.refuse_launch = True
    response = client.post(
        "/v1/jobs:run",
        json={"agent_id": "a1", "submission_prefix": "sub/", "run_prefix": "runs/1/"},
        headers={"Authorization": "Bearer tok-alice"},
    )
    assert response.status_code == 502 and response.json()["error"]["code"] == "JOB_LAUNCH_FAILED"
    assert "quota/job_ledger.jsonl" not in fake.buckets.files(AUDIT)


def test_bs_4_53_verifier_on_hf_mounts_the_private_set_from_the_audit_bucket(
    fake: FakeJobsHub, tmp_path: Path
) -> None:
    fake.buckets.put(AUDIT, "private/eval.json", b"[[2, true]]")
    fake.buckets.tokens["tok-alice"] = {
        "name": "alice",
        "orgs": [{"name": "acme", "roleInOrg": "contributor"}],
    }
    fake.buckets.add_bucket("acme/chal-a1", author="alice")
    fake.buckets.put("acme/chal-a1", ".bucket-sync-handshake", b"alice")
    fake.buckets.put("acme/chal-a1", "sub/predict.py", b"def predict(n): return True\n")
    fake.buckets.put(
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
    app = create_app(
        settings,
        store=HfBucketStore(token="hf_admin", api=fake),
        identity=HfIdentity(
            admin_token="hf_admin", api=fake.buckets, clock=clock, email_lookup=lambda *a: []
        ),
        clock=clock,
        job_runner=HfJobRunner(token="hf_admin", namespace="acme", api=fake),
    )
    with TestClient(app) as client:
        auth = {"Authorization": "Bearer tok-alice"}
        assert client.post("/v1/agents/register", json={"agent_id": "a1"}, headers=auth).is_success
        promoted = client.post("/v1/results", json={"source": "hf://buckets/acme/chal-a1/r.md"})
        assert promoted.status_code == 201, promoted.text
        filename = promoted.json()["filename"]
        eventually(lambda: "job0001" in fake.jobs)
        volumes = {v["mountPath"]: v for v in fake.jobs["job0001"]["volumes"]}
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
            copy
            for name, call in fake.buckets.calls
            if name == "batch_bucket_files" and call["bucket"] == AUDIT
            for copy in call["copy"]
        ]
        assert copies and all(c[1] == "acme/chal-a1" for c in copies)
        assert "--private-dir" in fake.jobs["job0001"]["spec"]["command"]
        fake.complete("job0001", {"score": 0.79})
        index = eventually(
            lambda: fake.buckets.files(CENTRAL).get("results/verification_status.json")
        )
        assert index is not None and json.loads(index) == {filename: "valid"}
