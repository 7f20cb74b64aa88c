"""The README's example challenge end to end on a laptop: a real server on loopback, the
organizer and agent CLIs, the example harness run by the local job runner, and the
verifier re-running the champion on the private eval set."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from typer.testing import CliRunner

from agenthub.bucketsync.app import create_app
from agenthub.cli import app as cli
from tests.bucketsync.conftest import make_settings
from tests.bucketsync.scoring.conftest import EXAMPLE, eventually

SERVICE_ENV = {
    "ORG": "acme",
    "COLLAB_SLUG": "chal",
    "AUDIT_BUCKET": "acme-admin/chal-audit",
    "JOBS_ENABLED": "true",
    "VERIFIER_ENABLED": "true",
    "JOB_POLL_S": "0.05",
}


def run(args: list[str], env: dict[str, str]) -> str:
    result = CliRunner().invoke(cli, args, env=env)
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


@pytest.fixture
def organizer(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    data_dir = tmp_path / "data"
    env = {**SERVICE_ENV, "BUCKETSYNC_DATA_DIR": str(data_dir)}
    installed = run(
        [
            "bucketsync",
            "challenge",
            "install",
            str(EXAMPLE / "harness"),
            "--private",
            str(EXAMPLE / "private"),
        ],
        env,
    )
    assert "hf://buckets/acme/chal-main-bucket/harness/" in installed
    settings = make_settings(
        data_dir,
        **{k: v for k, v in SERVICE_ENV.items() if k not in ("ORG", "COLLAB_SLUG", "AUDIT_BUCKET")},
    )
    application = create_app(settings)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(application, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", env
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_readme_example_register_run_promote_and_watch_it_verified(
    organizer: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    url, organizer_env = organizer
    token = run(["bucketsync", "users", "add", "alice", "--role", "contributor"], organizer_env)
    env = {"BUCKETSYNC_URL": url, "BUCKETSYNC_TOKEN": token}
    auth = {"Authorization": f"Bearer {token}"}
    bucket = "hf://buckets/acme/chal-solver-a"

    run(["buckets", "create", "acme/chal-solver-a"], env)
    (tmp_path / "hs").write_text("alice")
    run(["buckets", "cp", str(tmp_path / "hs"), f"{bucket}/.bucket-sync-handshake"], env)
    registered = httpx.post(
        f"{url}/v1/agents/register", json={"agent_id": "solver-a"}, headers=auth
    )
    assert registered.status_code == 201, registered.text

    predict = EXAMPLE / "submissions" / "good" / "predict.py"
    run(["buckets", "cp", str(predict), f"{bucket}/submission/predict.py"], env)
    job = httpx.post(
        f"{url}/v1/jobs:run",
        json={"agent_id": "solver-a", "submission_prefix": "submission/", "run_prefix": "runs/1/"},
        headers=auth,
    )
    assert job.status_code == 202, job.text

    def finished() -> dict[str, object] | None:
        status = json.loads(run(["buckets", "cp", f"{bucket}/runs/1/job_status.json", "-"], env))
        return status if status.get("finished_at") else None

    assert eventually(finished)["stage"] == "COMPLETED"
    summary = json.loads(run(["buckets", "cp", f"{bucket}/runs/1/summary.json", "-"], env))
    result = tmp_path / "result.md"
    result.write_text(
        f"---\nscore: {summary['score']}\nmethod: trial division\nstatus: agent-run\n"
        "description: exact primality\nartifacts: runs/1/\n---\nScored by jobs:run.\n"
    )
    run(["buckets", "cp", str(result), f"{bucket}/results/r1.md"], env)
    promoted = httpx.post(f"{url}/v1/results", json={"source": f"{bucket}/results/r1.md"})
    assert promoted.status_code == 201, promoted.text
    filename = promoted.json()["filename"]

    def verified() -> list[dict[str, object]] | None:
        rows = httpx.get(f"{url}/v1/leaderboard", params={"verification": "valid"}).json()["rows"]
        return rows or None

    [row] = eventually(verified)
    assert row["filename"] == filename and row["agent"] == "solver-a" and row["score"] == 1.0
    inbox = httpx.get(f"{url}/v1/inbox/solver-a", params={"expand": "true"}).json()["items"]
    assert any("**valid**" in item["body"] for item in inbox)
