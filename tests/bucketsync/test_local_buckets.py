"""Local scratch buckets: the HF ownership rules off HF (design bucketsync.md)."""

from __future__ import annotations

from pathlib import Path

from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import World


def test_create_put_list_get_roundtrip(world: World) -> None:
    world.user("alice")
    auth = world.auth("alice")
    created = world.client.post("/local/buckets/acme/chal-a1", headers=auth)
    assert created.status_code == 201 and created.json()["creator"] == "alice"
    again = world.client.post("/local/buckets/acme/chal-a1", headers=auth)
    assert again.status_code == 200 and again.json()["created"] is False
    put = world.client.put(
        "/local/buckets/acme/chal-a1/files/notes/m.md", content=b"x", headers=auth
    )
    assert put.json()["uri"] == "hf://buckets/acme/chal-a1/notes/m.md"
    tree = world.client.get("/local/buckets/acme/chal-a1/tree?prefix=notes", headers=auth)
    assert [item["path"] for item in tree.json()["items"]] == ["notes/m.md"]
    got = world.client.get("/local/buckets/acme/chal-a1/files/notes/m.md", headers=auth)
    assert got.content == b"x"


def test_bs_0_1_only_the_creator_or_an_org_admin_writes(world: World) -> None:
    world.user("alice")
    world.user("bob")
    world.user("root", role="admin")
    world.client.post("/local/buckets/acme/chal-a1", headers=world.auth("alice"))
    url = "/local/buckets/acme/chal-a1/files/m.md"
    denied = world.client.put(url, content=b"x", headers=world.auth("bob"))
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "FORBIDDEN"
    assert world.client.put(url, content=b"x", headers=world.auth("root")).status_code == 201


def test_bs_0_1_agents_cannot_write_the_central_bucket(world: World) -> None:
    world.user("alice")
    url = f"/local/buckets/{world.hub.central}/files/message_board/20990101-000000-000_x.md"
    response = world.client.put(url, content=b"forged", headers=world.auth("alice"))
    assert response.status_code == 403


def test_creating_needs_a_namespace_you_belong_to(world: World) -> None:
    world.user("alice")
    response = world.client.post("/local/buckets/other-org/x", headers=world.auth("alice"))
    assert response.status_code == 403
    own = world.client.post("/local/buckets/alice/x", headers=world.auth("alice"))
    assert own.status_code == 201
    world.user("reader", role="read")
    assert (
        world.client.post("/local/buckets/acme/r", headers=world.auth("reader")).status_code == 403
    )


def test_someone_elses_bucket_name_cannot_be_taken(world: World) -> None:
    world.user("alice")
    world.user("bob")
    world.client.post("/local/buckets/acme/chal-a1", headers=world.auth("alice"))
    response = world.client.post("/local/buckets/acme/chal-a1", headers=world.auth("bob"))
    assert response.status_code == 403


def test_private_buckets_are_readable_only_by_members(world: World) -> None:
    world.user("alice")
    world.client.post(
        "/local/buckets/alice/secret", json={"private": True}, headers=world.auth("alice")
    )
    world.client.put(
        "/local/buckets/alice/secret/files/a", content=b"x", headers=world.auth("alice")
    )
    world.user("bob")
    response = world.client.get("/local/buckets/alice/secret/files/a", headers=world.auth("bob"))
    assert response.status_code == 403


def test_scratch_paths_reject_traversal_but_allow_the_handshake(world: World) -> None:
    world.user("alice")
    world.client.post("/local/buckets/acme/chal-a1", headers=world.auth("alice"))
    base = "/local/buckets/acme/chal-a1/files/"
    for path in ("a/%2e%2e/b", "a/%2E%2E%2Fb", "x%00y"):
        response = world.client.put(base + path, content=b"x", headers=world.auth("alice"))
        assert response.status_code in (400, 404), path
        if response.status_code == 400:
            assert response.json()["error"]["code"] == "INVALID_PATH"
    ok = world.client.put(
        base + ".bucket-sync-handshake", content=b"alice", headers=world.auth("alice")
    )
    assert ok.status_code == 201


def test_local_store_writes_are_atomic_and_hash_addressed(tmp_path: Path) -> None:
    store = LocalBucketStore(tmp_path, clock=FrozenClock())
    store.create("ns/b", creator="me")
    store.write_batch("ns/b", Batch(adds=[("a/x.md", b"one"), ("a/y.md", b"one")]))
    entries = store.list("ns/b", "a")
    assert [e.path for e in entries] == ["a/x.md", "a/y.md"]
    assert entries[0].content_hash == entries[1].content_hash
    store.write_batch("ns/b", Batch(copies=[("ns/b", entries[0].content_hash, "c/z.md")]))
    assert store.read("ns/b", "c/z.md") == b"one"
    leftovers = [p for p in (tmp_path / "buckets").rglob("*") if p.name.startswith(".tmp-")]
    assert leftovers == []


def test_local_store_prefix_matches_whole_components(tmp_path: Path) -> None:
    store = LocalBucketStore(tmp_path, clock=FrozenClock())
    store.create("ns/b", creator="me")
    store.write_batch("ns/b", Batch(adds=[("logs/a", b"1"), ("logs.json", b"2")]))
    assert [e.path for e in store.list("ns/b", "logs")] == ["logs/a"]


def test_service_buckets_cannot_be_created_by_agents(world: World) -> None:
    world.user("alice")
    for bucket in (world.hub.central, world.hub.settings.audit_bucket):
        response = world.client.post(f"/local/buckets/{bucket}", headers=world.auth("alice"))
        assert response.status_code == 403


def test_server_refuses_a_central_bucket_someone_else_created(tmp_path: Path) -> None:
    import pytest
    from fastapi.testclient import TestClient

    from agenthub.bucketsync.app import create_app
    from agenthub.bucketsync.settings import SettingsError
    from tests.bucketsync.conftest import make_settings

    settings = make_settings(tmp_path / "d")
    LocalBucketStore(settings.data_dir).create(settings.central_bucket, creator="mallory")
    with pytest.raises(SettingsError, match="mallory"), TestClient(create_app(settings)):
        pass
