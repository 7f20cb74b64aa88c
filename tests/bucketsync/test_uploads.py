"""Files of submission size through the local bucket API (issue 28 point 3): a 1 GiB upload
streamed to disk by a real server process within a memory bound, the upload limit its own
setting named by every 413, and an interrupted upload changing nothing."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import httpx

from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import ORG, SLUG, World, make_settings
from tests.bucketsync.test_multiworker import serve, serve_env

MIB = 1 << 20
GIB = 1 << 30


def vm_hwm(pid: int) -> int:
    """A process's peak resident memory so far, in bytes (/proc/<pid>/status VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def generated(size: int, digest: hashlib._Hash) -> Iterator[bytes]:
    """`size` bytes made up as they are sent (nothing of that size exists anywhere)."""
    piece = bytes(range(256)) * (MIB // 256)
    sent = 0
    while sent < size:
        chunk = piece[: min(MIB, size - sent)]
        digest.update(chunk)
        sent += len(chunk)
        yield chunk


def test_a_1_gib_file_is_uploaded_and_downloaded_by_a_server_within_a_memory_bound(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    env = serve_env(data)
    process, base = serve(env, tmp_path / "server.log")
    try:
        token = LocalIdentity(data / "users.json", org=ORG).add_user("alice", role="contributor")
        auth = {"Authorization": f"Bearer {token}"}
        url = f"{base}/local/buckets/{ORG}/{SLUG}-a1/files/ckpt/model.bin"
        with httpx.Client(headers=auth, timeout=httpx.Timeout(300.0)) as client:
            assert client.post(f"{base}/local/buckets/{ORG}/{SLUG}-a1").status_code == 201
            # Warm the route once, so the baseline counts what serving costs anyway.
            assert client.put(url, content=b"warm-up").status_code == 201
            before = vm_hwm(process.pid)

            sent = hashlib.sha256()
            put = client.put(
                url, content=generated(GIB, sent), headers={"Content-Length": str(GIB)}
            )
            assert put.status_code == 201, put.text
            assert put.json()["size"] == GIB
            assert put.json()["content_hash"] == sent.hexdigest()
            after_upload = vm_hwm(process.pid)

            received = hashlib.sha256()
            size = 0
            with client.stream("GET", url) as response:
                assert response.status_code == 200
                for piece in response.iter_bytes(MIB):
                    received.update(piece)
                    size += len(piece)
            after_download = vm_hwm(process.pid)
            tree = client.get(f"{base}/local/buckets/{ORG}/{SLUG}-a1/tree").json()["items"]
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert size == GIB and received.hexdigest() == sent.hexdigest()
    assert [(i["path"], i["size"], i["content_hash"]) for i in tree] == [
        ("ckpt/model.bin", GIB, sent.hexdigest())
    ]
    # A body held in memory would add at least 1 GiB; pieces of 1 MiB add almost nothing.
    assert after_upload - before < 64 * MIB, (before, after_upload)
    assert after_download - before < 64 * MIB, (before, after_download)
    assert not [p for p in data.rglob(".tmp-*")]


def test_a_file_over_the_json_body_limit_but_under_the_upload_limit_is_accepted(
    world: World,
) -> None:
    world.user("alice")
    world.client.post("/local/buckets/acme/chal-a1", headers=world.auth("alice"))
    body = os.urandom(world.hub.settings.max_request_bytes + MIB)
    put = world.client.put(
        "/local/buckets/acme/chal-a1/files/data.bin", content=body, headers=world.auth("alice")
    )
    assert put.status_code == 201, put.text
    got = world.client.get(
        "/local/buckets/acme/chal-a1/files/data.bin", headers=world.auth("alice")
    )
    assert got.content == body


def small_limits(tmp_path: Path) -> Iterator[World]:
    from fastapi.testclient import TestClient

    from agenthub.bucketsync.app import create_app

    settings = make_settings(tmp_path, MAX_UPLOAD_BYTES="1000", MAX_REQUEST_BYTES="500")
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    store = LocalBucketStore(settings.data_dir, clock=FrozenClock())
    app = create_app(settings, store=store, identity=identity, clock=FrozenClock())
    with TestClient(app) as client:
        yield World(client, app.state.hub, identity)


def test_a_declared_size_over_max_upload_bytes_is_refused_naming_the_setting(
    tmp_path: Path,
) -> None:
    for world in small_limits(tmp_path):
        world.user("alice")
        world.client.post("/local/buckets/acme/chal-a1", headers=world.auth("alice"))
        response = world.client.put(
            "/local/buckets/acme/chal-a1/files/big.bin",
            content=b"x" * 1001,
            headers=world.auth("alice"),
        )
        assert response.status_code == 413
        error = response.json()["error"]
        assert error["code"] == "PAYLOAD_TOO_LARGE"
        assert "MAX_UPLOAD_BYTES" in error["message"] and "1000" in error["message"]
        assert "MAX_UPLOAD_BYTES" in error["hint"]


def test_a_json_body_over_max_request_bytes_is_refused_naming_that_setting(
    tmp_path: Path,
) -> None:
    for world in small_limits(tmp_path):
        response = world.client.post(
            "/v1/messages",
            content=b"{" + b" " * 600 + b"}",
            headers={"Content-Type": "application/json"},
        )
        assert response.status_code == 413
        error = response.json()["error"]
        assert "MAX_REQUEST_BYTES" in error["message"] and "500" in error["message"]
        assert "MAX_REQUEST_BYTES" in error["hint"]


def test_an_undeclared_body_over_the_limit_is_cut_off_and_changes_nothing(
    tmp_path: Path,
) -> None:
    for world in small_limits(tmp_path):
        world.user("alice")
        world.client.post("/local/buckets/acme/chal-a1", headers=world.auth("alice"))
        url = "/local/buckets/acme/chal-a1/files/big.bin"
        assert world.client.put(url, content=b"old", headers=world.auth("alice")).status_code == 201

        def chunked() -> Iterator[bytes]:
            for _ in range(5):
                yield b"y" * 300

        response = world.client.put(url, content=chunked(), headers=world.auth("alice"))
        assert response.status_code == 413
        assert "MAX_UPLOAD_BYTES" in response.json()["error"]["hint"]
        assert world.client.get(url, headers=world.auth("alice")).content == b"old"
        assert not [p for p in (tmp_path / "buckets").rglob(".tmp-*")]


def test_an_upload_left_by_a_dead_process_is_swept_and_a_live_one_is_not(
    tmp_path: Path,
) -> None:
    store = LocalBucketStore(tmp_path, clock=FrozenClock())
    store.create("ns/b", creator="me")
    upload = store.upload("ns/b", "big.bin")
    upload.write(b"half a checkpoint")
    (temp,) = (tmp_path / "buckets").rglob(".tmp-*")
    assert store.sweep(min_age_s=0).temps_removed == 0  # this process is alive
    dead = temp.with_name(temp.name.replace(f".tmp-{os.getpid()}-", ".tmp-999999999-"))
    temp.rename(dead)
    assert store.sweep(min_age_s=0).temps_removed == 1
    assert not dead.exists() and store.list("ns/b") == []
    upload.abort()
