"""The read model: listing cache, content cache, overlay, degradation (§7)."""

from __future__ import annotations

import hashlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agenthub.bucketsync.core.readmodel import ReadModel
from agenthub.bucketsync.storage.base import Batch, FileEntry
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import World

BUCKET = "acme/central"


def seeded(tmp_path, clock: FrozenClock, files: dict[str, bytes]) -> LocalBucketStore:  # type: ignore[no-untyped-def]
    store = LocalBucketStore(tmp_path / "store", clock=clock)
    store.create(BUCKET, creator="bucket-sync")
    store.write_batch(BUCKET, Batch(adds=list(files.items())))
    return store


def test_bs_7_1_gets_are_served_from_the_cache_not_the_bucket(world: World) -> None:
    world.agent("agent-1")
    world.raw("agent-1", "hello")
    urls = ("/v1/messages?expand=true", "/v1/inbox/agent-1", "/v1/agents?expand=true")
    for url in urls:  # first touch lists each folder once
        world.client.get(url)
    store = world.hub.store
    listed, batches = store.list_calls, store.read_many_calls  # type: ignore[attr-defined]
    for _ in range(20):
        for url in urls:
            assert world.client.get(url).status_code == 200
    assert store.list_calls == listed  # type: ignore[attr-defined]
    assert store.read_many_calls == batches  # type: ignore[attr-defined]


def test_bs_7_2_listing_refreshes_once_per_ttl(tmp_path, clock: FrozenClock) -> None:  # type: ignore[no-untyped-def]
    store = seeded(tmp_path, clock, {"message_board/a.md": b"a"})
    model = ReadModel(store, BUCKET, clock, ttl_s=30, content_cache_max_bytes=1 << 20)
    for _ in range(5):
        model.entries("message_board/")
    assert model.listings == 1
    clock.advance(29.9)
    model.entries("message_board/")
    assert model.listings == 1
    clock.advance(0.2)
    model.entries("message_board/")
    assert model.listings == 2


class SlowListStore(LocalBucketStore):
    def list(self, bucket: str, prefix: str = "", *, recursive: bool = True):  # type: ignore[no-untyped-def]
        time.sleep(0.05)
        return super().list(bucket, prefix, recursive=recursive)


def test_bs_7_2_polling_storm_costs_one_listing(tmp_path, clock: FrozenClock) -> None:  # type: ignore[no-untyped-def]
    store = SlowListStore(tmp_path / "store", clock=clock)
    store.create(BUCKET, creator="x")
    model = ReadModel(store, BUCKET, clock, ttl_s=30, content_cache_max_bytes=1 << 20)
    barrier = threading.Barrier(40)

    def poll(_i: int) -> int:
        barrier.wait()
        return len(model.entries("inbox/"))

    with ThreadPoolExecutor(max_workers=40) as pool:
        list(pool.map(poll, range(40)))
    assert model.listings == 1
    assert store.list_calls == 1


def test_bs_7_3_identical_copies_share_one_content_entry(world: World) -> None:
    for agent in ("agent-1", "agent-2", "agent-3", "agent-4"):
        world.agent(agent)
    world.raw("agent-1", "@agent-2 @agent-3 @agent-4")
    before = len(world.hub.read_model.content)
    for handle in ("agent-2", "agent-3", "agent-4"):
        assert len(world.client.get(f"/v1/inbox/{handle}?expand=true").json()["items"]) == 1
    world.client.get("/v1/messages?expand=true")
    assert len(world.hub.read_model.content) == before


def test_bs_7_4_content_cache_evicts_by_bytes_and_refetches(tmp_path, clock: FrozenClock) -> None:  # type: ignore[no-untyped-def]
    files = {f"message_board/{i:03d}.md": f"body {i} ".encode() * 20 for i in range(10)}
    store = seeded(tmp_path, clock, files)
    model = ReadModel(store, BUCKET, clock, ttl_s=30, content_cache_max_bytes=500)
    paths = sorted(files)
    first = model.records(paths, "message_board/")
    assert len(first) == 10  # eviction never drops a record from a response
    assert model.content.total_bytes <= 500
    assert model.content.evictions > 0
    again = model.records(paths, "message_board/")
    assert {p: r.body for p, r in again.items()} == {p: r.body for p, r in first.items()}


def test_bs_7_5_cold_misses_are_one_batch_read(tmp_path, clock: FrozenClock) -> None:  # type: ignore[no-untyped-def]
    files = {f"message_board/{i:03d}.md": f"m{i}".encode() for i in range(25)}
    store = seeded(tmp_path, clock, files)
    model = ReadModel(store, BUCKET, clock, ttl_s=30, content_cache_max_bytes=1 << 20)
    model.records(sorted(files), "message_board/")
    assert store.read_many_calls == 1


def test_bs_7_6_write_through_is_exact_regardless_of_ttl(world: World) -> None:
    world.agent("agent-1")
    world.client.get("/v1/messages")  # listing cached; the frozen clock never expires it
    filename = world.raw("agent-1", "fresh").json()["filename"]
    assert world.client.get("/v1/messages").json()["items"] == [filename]
    assert world.client.get(f"/v1/messages/{filename}").json()["body"] == "fresh\n"


def test_bs_7_6_overlay_survives_a_listing_that_started_before_the_write(
    tmp_path: Path,
    clock: FrozenClock,
) -> None:
    store = seeded(tmp_path, clock, {})
    model = ReadModel(store, BUCKET, clock, ttl_s=30, content_cache_max_bytes=1 << 20)
    from agenthub.bucketsync.storage.base import FileEntry

    stale: list[FileEntry] = []  # a listing taken before the write landed
    original = store.list
    store.list = lambda *a, **k: stale  # type: ignore[method-assign]
    entry = FileEntry("message_board/x.md", 1, "h")
    model.write_through("message_board/", entry, b"x")
    clock.advance(31)
    assert "message_board/x.md" in model.entries("message_board/")
    store.list = original  # type: ignore[method-assign]


def test_bs_7_7_ttl_refresh_picks_up_out_of_band_edits(world: World) -> None:
    world.agent("agent-1")
    filename = world.raw("agent-1", "original").json()["filename"]
    assert world.client.get(f"/v1/messages/{filename}").json()["body"] == "original\n"
    world.hub.store.write_batch(  # an admin edits the file directly in the bucket
        world.hub.central, Batch(adds=[(f"message_board/{filename}", b"edited by admin\n")])
    )
    assert world.client.get(f"/v1/messages/{filename}").json()["body"] == "original\n"
    world.hub.clock.advance(world.hub.settings.listing_ttl_s * 3)  # type: ignore[attr-defined]
    assert world.client.get(f"/v1/messages/{filename}").json()["body"] == "edited by admin\n"


def test_bs_7_8_malformed_files_degrade_to_empty_frontmatter(world: World) -> None:
    world.agent("agent-1")
    bad = {
        "message_board/20260301-110000-000_agent-1.md": b"---\n- not a mapping\n---\nlist fm",
        "message_board/20260301-110000-001_agent-1.md": b"\xff\xfe not utf8",
        "message_board/20260301-110000-002_agent-1.md": b"---\nkey: [broken\n---\nbroken",
        "message_board/notes.txt": b"ignored",
    }
    world.hub.store.write_batch(world.hub.central, Batch(adds=list(bad.items())))
    world.hub.clock.advance(world.hub.settings.listing_ttl_s + 1)  # type: ignore[attr-defined]
    response = world.client.get("/v1/messages?expand=true&q=broken")
    assert response.status_code == 200
    page = world.client.get("/v1/messages?expand=true").json()
    assert page["count"] == 3
    assert all(item["frontmatter"] == {} for item in page["items"])


def _entry(path: str, data: bytes) -> FileEntry:
    return FileEntry(path, len(data), hashlib.sha256(data).hexdigest())


def test_joined_is_built_once_per_change_of_any_of_its_folders(
    tmp_path: Path, clock: FrozenClock
) -> None:
    """An inbox joins the handle's copies with every broadcast: its value is rebuilt when
    either folder changes, and only then."""
    store = seeded(tmp_path, clock, {"inbox/alice/a.md": b"a", "broadcasts/b.md": b"b"})
    model = ReadModel(store, BUCKET, clock, ttl_s=30, content_cache_max_bytes=1 << 20)
    builds: list[int] = []

    def joined() -> list[str]:
        builds.append(1)
        return sorted([*model.entries("inbox/"), *model.entries("broadcasts/")])

    def read() -> list[str]:
        return model.joined(("inbox", "alice"), ("inbox/", "broadcasts/"), joined)

    assert read() == ["broadcasts/b.md", "inbox/alice/a.md"]
    assert read() == read()
    assert len(builds) == 1
    model.write_through("broadcasts/", _entry("broadcasts/c.md", b"c"), b"c")
    assert "broadcasts/c.md" in read()
    model.write_through("inbox/", _entry("inbox/alice/d.md", b"d"), b"d")
    assert "inbox/alice/d.md" in read()
    assert len(builds) == 3


def test_the_broken_variant_a_join_keyed_on_one_folder_serves_a_stale_inbox(
    tmp_path: Path, clock: FrozenClock
) -> None:
    """Keyed on the copies' folder alone, the memo misses a broadcast: the waiter it woke
    would read an inbox without it and park again."""
    store = seeded(tmp_path, clock, {"inbox/alice/a.md": b"a"})
    model = ReadModel(store, BUCKET, clock, ttl_s=30, content_cache_max_bytes=1 << 20)

    def joined() -> list[str]:
        return sorted([*model.entries("inbox/"), *model.entries("broadcasts/")])

    def read(folders: tuple[str, ...]) -> list[str]:
        return model.joined(folders, folders, joined)

    for folders in (("inbox/",), ("inbox/", "broadcasts/")):
        read(folders)
    model.write_through("broadcasts/", _entry("broadcasts/c.md", b"c"), b"c")
    assert "broadcasts/c.md" not in read(("inbox/",))
    assert "broadcasts/c.md" in read(("inbox/", "broadcasts/"))


def test_a_joined_value_built_from_a_newer_listing_is_rebuilt_not_kept(
    tmp_path: Path, clock: FrozenClock
) -> None:
    """A write landing while the value is built: stored under the versions read before,
    so the next read rebuilds it rather than keep what it saw."""
    store = seeded(tmp_path, clock, {})
    model = ReadModel(store, BUCKET, clock, ttl_s=30, content_cache_max_bytes=1 << 20)
    builds: list[list[str]] = []

    def joined() -> list[str]:
        if not builds:  # the write lands after the versions were read
            model.write_through("broadcasts/", _entry("broadcasts/x.md", b"x"), b"x")
        builds.append(sorted(model.entries("broadcasts/")))
        return builds[-1]

    def read() -> list[str]:
        return model.joined("k", ("broadcasts/",), joined)

    assert read() == ["broadcasts/x.md"]
    assert read() == ["broadcasts/x.md"]
    assert len(builds) == 2  # rebuilt once, then kept
    assert read() is builds[-1]
