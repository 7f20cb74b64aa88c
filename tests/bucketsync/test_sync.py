"""Artifact and shared-resource syncs (BS-4.17, 4.18, 5.1, 5.6, 5.12, 1.19, 1.20, 6.8)."""

from __future__ import annotations

import pytest

from tests.bucketsync.conftest import World


@pytest.fixture
def files(world: World) -> World:
    world.agent("agent-1")
    for path, data in {
        "run/model.bin": b"weights" * 10,
        "run/logs/train.txt": b"loss 0.1",
        "run/.cache/tmp": b"hidden",
        "notes.md": b"# notes",
    }.items():
        assert world.put("agent-1", path, data).status_code == 201
    return world


def test_bs_4_17_bs_1_19_artifacts_sync_mirrors_by_hash(files: World) -> None:
    world = files
    response = world.client.post(
        "/v1/artifacts:sync", json={"source": world.uri("agent-1", "run/"), "dest_slug": "v2"}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["dest"] == "artifacts/v2_agent-1/"
    assert {f["dest_path"] for f in body["files"]} == {
        "artifacts/v2_agent-1/model.bin",
        "artifacts/v2_agent-1/logs/train.txt",
    }
    assert body["bytes_copied"] == 70 + 8
    central = world.hub.central
    assert world.hub.store.read(central, "artifacts/v2_agent-1/logs/train.txt") == b"loss 0.1"
    assert world.hub.store.read(central, "artifacts/v2_agent-1/.cache/tmp") is None


def test_bs_5_12_artifacts_dest_slug_must_be_a_slug(files: World) -> None:
    for slug in ("../x", "Run", "a/b", ""):
        response = files.client.post(
            "/v1/artifacts:sync", json={"source": files.uri("agent-1", "run/"), "dest_slug": slug}
        )
        assert response.status_code == 400, slug
        assert response.json()["error"]["code"] == "INVALID_PATH"


def test_bs_4_18_bs_1_20_shared_resource_needs_the_agent_marker(files: World) -> None:
    world = files
    ok = world.client.post(
        "/v1/shared-resources:sync",
        json={"source": world.uri("agent-1", "notes.md"), "dest_path": "guides/tips_agent-1.md"},
    )
    assert ok.status_code == 200, ok.text
    assert ok.json()["files"][0]["dest_path"] == "shared_resources/guides/tips_agent-1.md"
    missing = world.client.post(
        "/v1/shared-resources:sync",
        json={"source": world.uri("agent-1", "notes.md"), "dest_path": "guides/tips.md"},
    )
    assert missing.status_code == 400
    error = missing.json()["error"]
    assert error["code"] == "INVALID_PATH" and "_agent-1" in error["hint"]
    folder = world.client.post(
        "/v1/shared-resources:sync",
        json={"source": world.uri("agent-1", "run"), "dest_path": "data_agent-1"},
    )
    assert {f["dest_path"] for f in folder.json()["files"]} == {
        "shared_resources/data_agent-1/model.bin",
        "shared_resources/data_agent-1/logs/train.txt",
    }


@pytest.mark.parametrize("dest", ["../README_agent-1.md", "a/../../x_agent-1", ".x_agent-1"])
def test_bs_5_12_shared_dest_path_is_path_validated(files: World, dest: str) -> None:
    response = files.client.post(
        "/v1/shared-resources:sync",
        json={"source": files.uri("agent-1", "notes.md"), "dest_path": dest},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_PATH"


def test_bs_5_1_blocked_targets() -> None:
    from agenthub.bucketsync.core.naming import check_not_blocked
    from agenthub.bucketsync.errors import InvalidPath

    for target in (
        "README.md",
        "LEADERBOARD.md",
        "shared_resources/README.md",
        "audit/202601.jsonl",
        "inbox/agent-1/x.md",
    ):
        with pytest.raises(InvalidPath):
            check_not_blocked(target)
    check_not_blocked("shared_resources/README_agent-1.md")


def test_bs_5_6_bs_6_8_sync_too_large_before_any_copy(files: World) -> None:
    world = files
    world.hub.settings.sync_max_files = 1
    response = world.client.post(
        "/v1/artifacts:sync", json={"source": world.uri("agent-1", "run/"), "dest_slug": "big"}
    )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "SYNC_TOO_LARGE"
    assert world.hub.store.list(world.hub.central, "artifacts/") == []
    world.hub.settings.sync_max_files = 100
    world.hub.settings.sync_max_bytes = 10
    assert (
        world.client.post(
            "/v1/artifacts:sync", json={"source": world.uri("agent-1", "run/"), "dest_slug": "big"}
        ).status_code
        == 413
    )


def test_bs_5_2_sync_sources_must_be_in_a_scratch_bucket(files: World) -> None:
    response = files.client.post(
        "/v1/artifacts:sync",
        json={"source": f"hf://buckets/{files.hub.central}/agents/", "dest_slug": "x"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_PATH"


def test_sync_of_missing_source_is_404_and_audited_when_done(files: World) -> None:
    world = files
    missing = world.client.post(
        "/v1/artifacts:sync", json={"source": world.uri("agent-1", "nope/"), "dest_slug": "x"}
    )
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "SOURCE_NOT_FOUND"
    before = world.hub.audit.written
    world.client.post(
        "/v1/artifacts:sync", json={"source": world.uri("agent-1", "run/"), "dest_slug": "x"}
    )
    assert world.hub.audit.written == before + 1
