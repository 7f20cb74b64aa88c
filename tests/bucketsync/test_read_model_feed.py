"""The read model following a change feed (`ReadModel.follow`, the `FeedSink` side) and
shedding refreshes for a request budget, against a local store and a feed driven by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agenthub.bucketsync.core.feedpatch import patch
from agenthub.bucketsync.core.readmodel import ReadModel
from agenthub.bucketsync.storage.base import Batch, FeedSink, FileChange, FileEntry
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock

BUCKET = "acme/central"
BOARD = "message_board/"


class HandFeed:
    """A `ChangeFeed` whose liveness and batches the test sets."""

    def __init__(self) -> None:
        self.sink: FeedSink | None = None
        self.is_live = False

    def start(self, sink: FeedSink) -> None:
        self.sink = sink

    def live(self) -> bool:
        return self.is_live

    def stop(self) -> None:
        self.is_live = False

    def stats(self) -> dict[str, Any]:
        return {"live": self.is_live}

    def send(self, *changes: FileChange) -> None:
        assert self.sink is not None
        self.sink.changed(list(changes))


class Budget:
    def __init__(self, *, refresh: bool) -> None:
        self.refresh = refresh
        self.shed = 0

    def may_refresh(self) -> bool:
        if not self.refresh:
            self.shed += 1
        return self.refresh

    def report(self) -> dict[str, Any]:
        return {"shed": self.shed}


def model_on(
    tmp_path: Path, clock: FrozenClock, **kwargs: Any
) -> tuple[LocalBucketStore, ReadModel]:
    store = LocalBucketStore(tmp_path / "store", clock=clock)
    store.create(BUCKET, creator="bucket-sync")
    store.write_batch(BUCKET, Batch(adds=[(f"{BOARD}a.md", b"a")]))
    return store, ReadModel(
        store, BUCKET, clock, ttl_s=30, content_cache_max_bytes=1 << 20, **kwargs
    )


def followed(tmp_path: Path, clock: FrozenClock) -> tuple[LocalBucketStore, ReadModel, HandFeed]:
    store, model = model_on(tmp_path, clock)
    feed = HandFeed()
    model.follow(feed)
    feed.is_live = True
    return store, model, feed


def test_a_live_feed_keeps_a_listing_past_its_ttl(tmp_path: Path, clock: FrozenClock) -> None:
    _store, model, feed = followed(tmp_path, clock)
    model.entries(BOARD)
    clock.advance(3600)
    model.entries(BOARD)
    assert model.listings == 1
    feed.is_live = False  # the stream went down: the TTL is back
    model.entries(BOARD)
    assert model.listings == 2


def test_feed_changes_patch_the_listing_without_listing(tmp_path: Path, clock: FrozenClock) -> None:
    _store, model, feed = followed(tmp_path, clock)
    version = model.version(BOARD)
    feed.send(
        FileChange(f"{BOARD}b.md", size=1, content_hash="hb"),
        FileChange(f"{BOARD}a.md", deleted=True),
        FileChange("agents/x.md", size=2, content_hash="hx"),  # another folder
    )
    assert model.entries(BOARD) == {f"{BOARD}b.md": FileEntry(f"{BOARD}b.md", 1, "hb")}
    assert model.version(BOARD) > version
    assert model.listings == 1


def test_an_update_carrying_only_what_changed_keeps_the_rest(
    tmp_path: Path, clock: FrozenClock
) -> None:
    _store, model, feed = followed(tmp_path, clock)
    before = model.entries(BOARD)[f"{BOARD}a.md"]
    feed.send(FileChange(f"{BOARD}a.md", content_hash="h2"))
    assert model.entries(BOARD)[f"{BOARD}a.md"] == FileEntry(f"{BOARD}a.md", before.size, "h2")
    assert model.listings == 1


def test_an_update_the_listing_cannot_complete_lists_again(
    tmp_path: Path, clock: FrozenClock
) -> None:
    _store, model, feed = followed(tmp_path, clock)
    model.entries(BOARD)
    feed.send(FileChange(f"{BOARD}unknown.md", size=3))  # no hash, not in the listing
    model.entries(BOARD)
    assert model.listings == 2


def test_a_reconcile_and_a_fresh_ready_each_force_a_listing(
    tmp_path: Path, clock: FrozenClock
) -> None:
    _store, model, feed = followed(tmp_path, clock)
    model.entries(BOARD)
    assert feed.sink is not None
    feed.sink.reconcile()
    model.entries(BOARD)
    assert model.listings == 2
    feed.sink.ready(from_scratch=False)  # resumed by cursor: the replay was exact
    model.entries(BOARD)
    assert model.listings == 2
    feed.sink.ready(from_scratch=True)
    model.entries(BOARD)
    assert model.listings == 3


def test_a_fresh_ready_re_takes_only_listings_taken_since_the_reconcile(
    tmp_path: Path, clock: FrozenClock
) -> None:
    _store, model, feed = followed(tmp_path, clock)
    model.entries(BOARD)
    assert feed.sink is not None
    clock.advance(1)
    feed.sink.reconcile()
    feed.sink.ready(from_scratch=True)  # nothing listed in between
    model.entries(BOARD)
    model.entries(BOARD)
    assert model.listings == 2


def test_a_change_arriving_while_a_listing_is_in_flight_is_not_lost(
    tmp_path: Path, clock: FrozenClock
) -> None:
    store, model, feed = followed(tmp_path, clock)
    model.entries(BOARD)
    model.invalidate(BOARD)  # a second listing, with a change arriving while it runs
    listed = store.list(BUCKET, BOARD)  # the bucket as the listing saw it, before the change

    def list_then_change(*_args: Any, **_kwargs: Any) -> list[FileEntry]:
        # The feed reports a change after the Hub answered the listing, before it is used.
        feed.send(FileChange(f"{BOARD}late.md", size=4, content_hash="hl"))
        return listed

    store.list = list_then_change  # type: ignore[method-assign]
    assert f"{BOARD}late.md" in model.entries(BOARD)


class UnreplayedModel(ReadModel):
    """The broken variant: feed changes patch the listing being served only, and a
    listing in flight does not get them replayed onto its result."""

    def changed(self, changes: list[FileChange]) -> None:
        for folder, state in self._folders.items():
            mine = [change for change in changes if change.path.startswith(folder)]
            with state.edit:
                if mine and state.entries is not None:
                    updated = dict(state.entries)
                    patch(updated, state.overlay, mine, self.content, 0.0)
                    state.entries = updated
                    state.version += 1


def test_the_broken_variant_without_the_replay_loses_that_change(
    tmp_path: Path, clock: FrozenClock
) -> None:
    store, _model = model_on(tmp_path, clock)
    model = UnreplayedModel(store, BUCKET, clock, ttl_s=30, content_cache_max_bytes=1 << 20)
    feed = HandFeed()
    model.follow(feed)
    feed.is_live = True
    model.entries(BOARD)
    model.invalidate(BOARD)  # a second listing, with a change arriving while it runs
    listed = store.list(BUCKET, BOARD)

    def list_then_change(*_args: Any, **_kwargs: Any) -> list[FileEntry]:
        feed.send(FileChange(f"{BOARD}late.md", size=4, content_hash="hl"))
        return listed

    store.list = list_then_change  # type: ignore[method-assign]
    assert f"{BOARD}late.md" not in model.entries(BOARD)


def test_own_write_echoed_under_the_hubs_hash_is_not_read_again(
    tmp_path: Path, clock: FrozenClock
) -> None:
    store, model, feed = followed(tmp_path, clock)
    model.entries(BOARD)
    model.write_through(BOARD, FileEntry(f"{BOARD}w.md", 5, "sha-of-mine"), b"hello")
    feed.send(FileChange(f"{BOARD}w.md", size=5, content_hash="xet-of-hub"))
    reads = store.read_many_calls
    record = model.record(f"{BOARD}w.md", BOARD)
    assert record is not None and record.body == "hello"
    assert record.content_hash == "xet-of-hub" and store.read_many_calls == reads


def test_a_budget_near_its_limit_sheds_ttl_refreshes_not_invalidations(
    tmp_path: Path, clock: FrozenClock
) -> None:
    budget = Budget(refresh=False)
    _store, model = model_on(tmp_path, clock, budget=budget)
    model.entries(BOARD)  # a first listing is a read, not a refresh
    clock.advance(31)
    model.entries(BOARD)
    assert model.listings == 1 and budget.shed == 1
    model.invalidate(BOARD)  # another worker wrote here: its write must be seen
    model.entries(BOARD)
    assert model.listings == 2
