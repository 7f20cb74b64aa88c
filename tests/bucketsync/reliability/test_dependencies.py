"""What a supervisor and an operator see of bucket-sync's dependencies: an unreachable bus
stops `serve` before it announces anything, with a non-zero exit and one line; healthz
reports each dependency and answers 503 while one is down; a contributor cannot write the
service's own buckets through the local bucket API (its org admins can, as on the Hub:
`test_org_admin_edits.py`)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.identity.local import LocalIdentity
from tests.bucketsync.conftest import ORG, World, make_settings
from tests.bucketsync.reliability.conftest import PrivateRedis
from tests.bucketsync.test_multiworker import free_port, serve_env


@pytest.mark.parametrize("workers", [1, 2])
def test_serve_with_an_unreachable_bus_exits_nonzero_before_announcing(
    tmp_path: Path, workers: int
) -> None:
    dead = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "agenthub.cli",
            "bucketsync",
            "serve",
            "--workers",
            str(workers),
            "--port",
            str(free_port()),
        ],
        env=serve_env(tmp_path / "data", BUCKETSYNC_BUS_URL=dead),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: BUCKETSYNC_BUS_URL redis://:***@127.0.0.1:")
    assert "start Redis" in lines[0] and "hunter2" not in lines[0]
    assert "Uvicorn running" not in result.stderr + result.stdout


@pytest.fixture
def bus_world(tmp_path: Path, private_redis: PrivateRedis) -> Iterator[World]:
    settings = make_settings(tmp_path / "data", BUCKETSYNC_BUS_URL=private_redis.url)
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(settings, identity=identity)
    with TestClient(app) as client:
        yield World(client, app.state.hub, identity)


def test_healthz_reports_each_dependency_ok(bus_world: World) -> None:
    response = bus_world.client.get("/v1/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert {name: check["status"] for name, check in body["dependencies"].items()} == {
        "store": "ok",
        "identity": "ok",
        "bus": "ok",
    }


def test_healthz_is_degraded_503_while_the_bus_is_cut(
    bus_world: World, private_redis: PrivateRedis
) -> None:
    private_redis.stop()
    response = bus_world.client.get("/v1/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "degraded"
    assert body["dependencies"]["bus"]["status"] == "down"
    assert body["dependencies"]["bus"]["error"]
    assert body["dependencies"]["store"]["status"] == "ok"


def test_healthz_without_a_bus_says_so_and_is_ok(world: World) -> None:
    body = world.client.get("/v1/healthz").json()
    assert body["status"] == "ok" and body["dependencies"]["bus"] == {"status": "none"}


@pytest.mark.parametrize("path", ["README.md", "LEADERBOARD.md", "inbox/bob/x.md", "notes.md"])
def test_a_contributor_cannot_write_the_central_bucket_through_the_local_api(
    world: World, path: str
) -> None:
    world.user("mallory")
    url = f"/local/buckets/{world.hub.central}/files/{path}"
    response = world.client.put(url, content=b"# forged", headers=world.auth("mallory"))
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "FORBIDDEN"
    assert world.hub.store.read(world.hub.central, path) is None
