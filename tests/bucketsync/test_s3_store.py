"""The S3 store (`BUCKETSYNC_STORAGE=s3`) against moto's S3 server on loopback: the storage
contract the local store passes too (parametrized over both), the compare-and-swap
capability, error mapping, an end-to-end bucket-sync on S3, and two `serve` processes with
separate data directories sharing one S3 bucket."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.app.adapters import default_adapters
from agenthub.bucketsync.errors import InvalidPath, StorageUnavailable, WriteOutcomeUnknown
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.identity.stored import StoredUsers
from agenthub.bucketsync.settings import SettingsError
from agenthub.bucketsync.storage.base import (
    Batch,
    BucketStore,
    ConditionalStore,
    compare_and_swap,
)
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.bucketsync.storage.s3 import S3BucketStore, S3Config
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import ORG, World, make_settings
from tests.bucketsync.test_multiworker import HttpWorld, serve, serve_env, stop
from tests.support.redisdb import drop_prefix, require_redis, unique_prefix
from tests.support.s3server import KEY_ID, REGION, SECRET, S3Server, running_s3

B = "ns/b"


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with running_s3() as server:
        yield server


@pytest.fixture(scope="module")
def s3_serial() -> Iterator[S3Server]:
    with running_s3(serial=True) as server:
        yield server


def s3_store(server: S3Server, bucket: str | None = None, **extra: object) -> S3BucketStore:
    config = S3Config(
        bucket=bucket or server.new_bucket(),
        endpoint=server.endpoint,
        region=REGION,
        access_key_id=KEY_ID,
        secret_access_key=SECRET,
        deadline_s=5,
        **extra,  # type: ignore[arg-type]
    )
    return S3BucketStore(config, clock=FrozenClock())


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> BucketStore:
    if request.param == "local":
        return LocalBucketStore(tmp_path / "store", clock=FrozenClock())
    server: S3Server = request.getfixturevalue("s3")
    return s3_store(server)


# -- the storage contract (every store) ------------------------------------------------
def test_info_of_a_missing_bucket_is_none_and_create_is_idempotent(store: BucketStore) -> None:
    assert store.info(B) is None
    first = store.create(B, creator="alice", private=True)
    again = store.create(B, creator="bob")
    assert (first.id, first.creator, first.private) == (B, "alice", True)
    assert again == first


def test_adds_list_with_whole_component_prefixes(store: BucketStore) -> None:
    store.create(B, creator="me")
    adds = [("logs/a", b"1"), ("logs/deep/b", b"22"), ("logs.json", b"3"), ("top.md", b"4")]
    store.write_batch(B, Batch(adds=adds))
    assert [e.path for e in store.list(B)] == ["logs.json", "logs/a", "logs/deep/b", "top.md"]
    assert [e.path for e in store.list(B, "logs")] == ["logs/a", "logs/deep/b"]
    assert [e.path for e in store.list(B, "logs/")] == ["logs/a", "logs/deep/b"]
    assert [e.path for e in store.list(B, "logs", recursive=False)] == ["logs/a"]
    assert [(e.path, e.size) for e in store.list(B, "logs/deep/b")] == [("logs/deep/b", 2)]
    assert store.list(B, "nothing") == []


def test_equal_bytes_have_equal_hashes_and_copies_go_by_hash(store: BucketStore) -> None:
    store.create(B, creator="me")
    store.create("ns/other", creator="me")
    store.write_batch(B, Batch(adds=[("x.md", b"same"), ("y.md", b"same"), ("z.md", b"other")]))
    x, y, z = store.list(B)
    assert x.content_hash == y.content_hash != z.content_hash
    store.write_batch("ns/other", Batch(copies=[(B, z.content_hash, "copied/z.md")]))
    assert store.read("ns/other", "copied/z.md") == b"other"
    assert store.list("ns/other")[0].content_hash == z.content_hash
    with pytest.raises(StorageUnavailable):
        store.write_batch("ns/other", Batch(copies=[(B, "0" * 32, "nope.md")]))


def test_a_batch_applies_copies_then_adds_then_deletes(store: BucketStore) -> None:
    store.create(B, creator="me")
    store.write_batch(B, Batch(adds=[("old.md", b"old"), ("gone.md", b"bye")]))
    old = store.list(B, "old.md")[0]
    store.write_batch(
        B,
        Batch(
            copies=[(B, old.content_hash, "dest.md")],
            adds=[("dest.md", b"new")],  # the add lands after the copy
            deletes=["gone.md", "never-was.md"],
        ),
    )
    assert store.read(B, "dest.md") == b"new"
    assert store.read(B, "gone.md") is None
    assert [e.path for e in store.list(B)] == ["dest.md", "old.md"]


def test_read_and_read_many_leave_absent_paths_out(store: BucketStore) -> None:
    store.create(B, creator="me")
    store.write_batch(B, Batch(adds=[(f"f{i}", str(i).encode()) for i in range(5)]))
    assert store.read(B, "f3") == b"3"
    assert store.read(B, "missing") is None
    assert store.read("ns/absent", "f3") is None
    got = store.read_many(B, ["f0", "f4", "missing", "f2"])
    assert got == {"f0": b"0", "f4": b"4", "f2": b"2"}
    assert store.read_many(B, []) == {}


def test_writes_to_a_missing_bucket_and_bad_paths_are_refused(store: BucketStore) -> None:
    with pytest.raises(StorageUnavailable):
        store.write_batch("ns/absent", Batch(adds=[("a", b"1")]))
    store.create(B, creator="me")
    for bad in ("../escape", "/abs", "a//b", "a/./b"):
        with pytest.raises(InvalidPath):
            store.write_batch(B, Batch(adds=[(bad, b"1")]))
    with pytest.raises(InvalidPath):
        store.info("no-slash")


# -- compare-and-swap (ConditionalStore) ----------------------------------------------------
def test_write_if_creates_once_and_replaces_only_the_version_read(store: BucketStore) -> None:
    assert isinstance(store, ConditionalStore)
    store.create(B, creator="me")
    v1 = store.write_if(B, "ledger.json", b"[1]", version=None)
    assert v1 is not None
    assert store.write_if(B, "ledger.json", b"[9]", version=None) is None  # exists already
    current = store.read_versioned(B, "ledger.json")
    assert current is not None and (current.data, current.version) == (b"[1]", v1)
    v2 = store.write_if(B, "ledger.json", b"[1,2]", version=v1)
    assert v2 is not None and v2 != v1
    assert store.write_if(B, "ledger.json", b"[1,3]", version=v1) is None  # stale
    assert store.read(B, "ledger.json") == b"[1,2]"


def test_two_writers_that_read_the_same_version_one_wins(store: BucketStore) -> None:
    """The broken variant first: a plain read-modify-write loses one of two interleaved
    updates; with `write_if` the second writer is told and nothing is lost."""
    assert isinstance(store, ConditionalStore)
    store.create(B, creator="me")
    store.write_batch(B, Batch(adds=[("n", b"0")]))
    a, b = store.read(B, "n"), store.read(B, "n")
    assert a is not None and b is not None
    store.write_batch(B, Batch(adds=[("n", str(int(a) + 1).encode())]))
    store.write_batch(B, Batch(adds=[("n", str(int(b) + 1).encode())]))
    assert store.read(B, "n") == b"1"  # two increments, one survives: the lost update

    first, second = store.read_versioned(B, "n"), store.read_versioned(B, "n")
    assert first is not None and second is not None
    assert store.write_if(B, "n", b"2", version=first.version) is not None
    assert store.write_if(B, "n", b"2", version=second.version) is None


def test_concurrent_compare_and_swap_loses_no_increment(
    store: BucketStore, request: pytest.FixtureRequest
) -> None:
    if not isinstance(store, LocalBucketStore):
        # moto's threaded server checks If-Match and then stores the object with no lock
        # around the two (seen losing 1 of 40 under load); AWS S3 applies a conditional put
        # atomically, and so does moto serving one request at a time (tests.support.s3server).
        store = s3_store(request.getfixturevalue("s3_serial"))
    assert isinstance(store, ConditionalStore)
    conditional: ConditionalStore = store
    store.create(B, creator="me")
    errors: list[BaseException] = []

    def bump(data: bytes | None) -> bytes:
        return str(int(data or b"0") + 1).encode()

    def worker() -> None:
        try:
            for _ in range(10):
                compare_and_swap(conditional, B, "counter", bump, attempts=200)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert store.read(B, "counter") == b"40"


# -- S3 specifics ---------------------------------------------------------------------------
def test_the_prefix_keeps_two_deployments_apart_in_one_s3_bucket(s3: S3Server) -> None:
    bucket = s3.new_bucket()
    first = s3_store(s3, bucket, prefix="chal-1")
    second = s3_store(s3, bucket, prefix="chal-2/")
    first.create(B, creator="me")
    first.write_batch(B, Batch(adds=[("a.md", b"1")]))
    assert second.info(B) is None and second.read(B, "a.md") is None
    assert s3_store(s3, bucket, prefix="chal-1").read(B, "a.md") == b"1"


def test_an_unreachable_store_is_storage_unavailable_with_nothing_applied() -> None:
    with running_s3() as server:
        store = s3_store(server)
        store.create(B, creator="me")
    # The server is gone: a read is retryable, a write was never sent.
    with pytest.raises(StorageUnavailable) as read_error:
        store.read(B, "a")
    assert read_error.value.hint == "retry in a few seconds"
    with pytest.raises(StorageUnavailable, match="nothing was applied") as write_error:
        store.write_batch(B, Batch(adds=[("a", b"1")]))
    assert not isinstance(write_error.value, WriteOutcomeUnknown)


def test_storage_s3_needs_a_bucket_and_is_chosen_by_the_setting(
    s3: S3Server, tmp_path: Path
) -> None:
    with pytest.raises(SettingsError, match="BUCKETSYNC_S3_BUCKET"):
        make_settings(tmp_path, BUCKETSYNC_STORAGE="s3")
    settings = make_settings(tmp_path, **s3.env(s3.new_bucket()))
    store, identity = default_adapters(settings)
    assert isinstance(store, S3BucketStore) and isinstance(identity, LocalIdentity)
    assert SECRET not in repr(settings.s3_secret_access_key)


# -- bucket-sync on S3, end to end -----------------------------------------------------------
def test_bucketsync_on_s3_posts_and_reads_messages(s3: S3Server, tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data", **s3.env(s3.new_bucket()))
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(settings, identity=identity)
    assert isinstance(app.state.hub.store, S3BucketStore)
    with TestClient(app) as client:
        world = World(client, app.state.hub, identity)
        world.agent("agent-1")
        world.agent("agent-2")
        promoted = world.promote("agent-1", "notes/hello.md", "hello from S3 @agent-2")
        assert promoted.status_code == 201, promoted.text
        raw = world.raw("agent-2", "a raw reply")
        assert raw.status_code == 201, raw.text
        board = client.get("/v1/messages").json()
        names = board["items"]
        assert promoted.json()["filename"] in names and raw.json()["filename"] in names
        inbox = client.get("/v1/inbox/agent-2").json()
        assert promoted.json()["filename"] in inbox["items"]
    # The board lives in the S3 bucket, not in the data directory.
    assert not (settings.data_dir / "buckets").exists()
    fresh = s3_store(s3, settings.s3_bucket)
    assert any(e.path.startswith("message_board/") for e in fresh.list(settings.central_bucket))


@pytest.mark.redis
def test_two_processes_with_separate_data_dirs_share_one_s3_bucket(
    s3: S3Server, tmp_path: Path
) -> None:
    url = require_redis()
    prefix = unique_prefix()
    bucket = s3.new_bucket()
    processes: list[subprocess.Popen[bytes]] = []
    worlds: list[HttpWorld] = []
    try:
        # Users live in the S3 bucket (identity.stored): both hosts know them.
        identity = LocalIdentity(StoredUsers(s3_store(s3, bucket)), org=ORG)
        tokens = {user: identity.add_user(user, role="contributor") for user in ("u1", "u2")}
        for name in ("a", "b"):
            data = tmp_path / f"data-{name}"
            env = serve_env(
                data, BUCKETSYNC_BUS_URL=url, BUCKETSYNC_BUS_PREFIX=prefix, **s3.env(bucket)
            )
            process, base = serve(env, tmp_path / f"{name}.log")
            processes.append(process)
            world = HttpWorld(base, identity)
            world.tokens = dict(tokens)
            worlds.append(world)
        a, b = worlds
        a._owner = b._owner = {"agent-1": "u1", "agent-2": "u2"}
        # Each agent sets up through a different process; both see both registrations.
        for world, agent, user in ((a, "agent-1", "u1"), (b, "agent-2", "u2")):
            world.create_bucket(agent, user)
            assert world.put(agent, ".bucket-sync-handshake", user).status_code == 201
            assert world.register(agent, user).status_code == 201
        for world in (a, b):
            for agent in ("agent-1", "agent-2"):
                assert world.client.get(f"/v1/agents/{agent}").status_code == 200

        # Concurrent posts through both processes.
        results: list[str] = []
        lock = threading.Lock()

        def post(world: HttpWorld, agent: str, i: int) -> None:
            response = world.promote(agent, f"notes/m{i}.md", f"message {i} from {agent}")
            assert response.status_code == 201, response.text
            with lock:
                results.append(response.json()["filename"])

        threads = [
            threading.Thread(target=post, args=(a if i % 2 else b, f"agent-{1 + i % 2}", i))
            for i in range(6)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(results) == 6
        for world in (a, b):
            seen = set(world.client.get("/v1/messages").json()["items"])
            assert set(results) <= seen, f"{world.client.base_url} misses {set(results) - seen}"
    finally:
        for world in worlds:
            world.client.close()
        stop(processes)
        drop_prefix(url, prefix)
