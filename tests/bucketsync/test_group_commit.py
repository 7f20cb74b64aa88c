"""Group commit (storage/groupcommit.py): concurrent writes to one bucket share one batch,
each writer returns once its own write was applied and gets its own outcome, and two
writes of one path are never merged (merging would reorder them)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from agenthub.bucketsync import deadlines
from agenthub.bucketsync.errors import PartialWrite, StorageUnavailable
from agenthub.bucketsync.storage.base import Batch
from agenthub.bucketsync.storage.groupcommit import GroupCommit, merge
from agenthub.bucketsync.storage.hf import HfBucketStore
from tests.support.hub_emulator import running_hub

B = "acme/main"


class Recorder:
    """A `send` that records each batch, holding the first one until `release()`."""

    def __init__(self, fail: Callable[[Batch], None] | None = None) -> None:
        self.sent: list[Batch] = []
        self.applied: set[str] = set()
        self.leases: list[float | None] = []
        self._gate = threading.Event()
        self.entered = threading.Event()
        self._fail = fail

    def release(self) -> None:
        self._gate.set()

    def __call__(self, bucket: str, batch: Batch) -> None:
        self.entered.set()
        self._gate.wait(10)
        self.sent.append(batch)
        self.leases.append(deadlines.remaining())
        if self._fail is not None:
            self._fail(batch)
        self.applied |= {path for path, _ in batch.adds}


def adds(*paths: str) -> Batch:
    return Batch(adds=[(path, b"x") for path in paths])


def run_concurrently(
    group: GroupCommit, recorder: Recorder, batches: list[Batch]
) -> list[Future[None]]:
    """The first batch is sent (and held) alone; the rest queue behind it."""
    pool = ThreadPoolExecutor(max_workers=len(batches))
    first = pool.submit(group.write, B, batches[0])
    assert recorder.entered.wait(5)
    rest = [pool.submit(group.write, B, batch) for batch in batches[1:]]
    time.sleep(0.2)  # the rest are queued behind the held batch
    assert not any(future.done() for future in [first, *rest])
    recorder.release()
    pool.shutdown(wait=True)
    return [first, *rest]


def test_writes_queued_behind_a_batch_share_the_next_one() -> None:
    recorder = Recorder()
    group = GroupCommit(recorder, linger_s=0)
    futures = run_concurrently(group, recorder, [adds(f"f{i}") for i in range(6)])
    for future in futures:
        future.result()
    assert [sorted(p for p, _ in batch.adds) for batch in recorder.sent] == [
        ["f0"],
        ["f1", "f2", "f3", "f4", "f5"],
    ]
    assert recorder.applied == {f"f{i}" for i in range(6)}


def test_a_lone_write_to_an_idle_bucket_does_not_linger() -> None:
    recorder = Recorder()
    recorder.release()
    group = GroupCommit(recorder, linger_s=5)
    started = time.monotonic()
    group.write(B, adds("a"))
    assert time.monotonic() - started < 1


def test_a_partial_failure_fails_only_the_writers_of_the_failed_paths() -> None:
    def fail_bad(batch: Batch) -> None:
        failed = [path for path, _ in batch.adds if path.startswith("bad")]
        if failed:
            raise PartialWrite("part failed", failed=failed)

    recorder = Recorder(fail=fail_bad)
    group = GroupCommit(recorder, linger_s=0)
    futures = run_concurrently(
        group, recorder, [adds("first"), adds("ok1"), adds("bad1", "ok2"), adds("ok3")]
    )
    assert [future.exception() is None for future in futures] == [True, True, False, True]
    error = futures[2].exception()
    assert isinstance(error, PartialWrite) and error.failed == ["bad1"]


def test_a_failed_batch_fails_every_writer_in_it() -> None:
    def refuse(batch: Batch) -> None:
        if len(batch.adds) > 1:
            raise StorageUnavailable("the Hub refused")

    recorder = Recorder(fail=refuse)
    group = GroupCommit(recorder, linger_s=0)
    futures = run_concurrently(group, recorder, [adds("a"), adds("b"), adds("c")])
    assert futures[0].exception() is None
    assert all(isinstance(f.exception(), StorageUnavailable) for f in futures[1:])


def test_two_writes_of_one_path_are_sent_in_order_in_two_batches() -> None:
    recorder = Recorder()
    group = GroupCommit(recorder, linger_s=0)
    futures = run_concurrently(
        group,
        recorder,
        [adds("held"), Batch(deletes=["journal/1.json"]), adds("journal/1.json"), adds("z")],
    )
    for future in futures:
        future.result()
    assert [(b.deletes, [p for p, _ in b.adds]) for b in recorder.sent] == [
        ([], ["held"]),
        (["journal/1.json"], []),
        ([], ["journal/1.json", "z"]),
    ]


def test_broken_variant_merging_a_delete_and_a_later_add_of_one_path_loses_the_add() -> None:
    """Why conflicting writes are not merged: the Hub applies a batch's adds before its
    deletes, so the merged batch deletes what the later write added."""
    with running_hub() as hub:
        hub.add_bucket(B)
        hub.put(B, "p.md", b"old")
        store = HfBucketStore(token="hf_merge", endpoint=hub.url, deadline_s=5)
        store.group.write(B, merge([Batch(deletes=["p.md"]), adds("p.md")]))
        assert "p.md" not in hub.files(B)
        store.write_batch(B, Batch(deletes=["p.md"]))
        store.write_batch(B, adds("p.md"))
        assert hub.files(B)["p.md"] == b"x"


def test_the_batch_is_sent_under_the_earliest_lease_of_its_writers() -> None:
    recorder = Recorder()
    group = GroupCommit(recorder, linger_s=0)

    def leased(batch: Batch, lease_s: float) -> Callable[[], None]:
        def write() -> None:
            with deadlines.within(lease_s):
                group.write(B, batch)

        return write

    pool = ThreadPoolExecutor(max_workers=3)
    first = pool.submit(group.write, B, adds("a"))
    assert recorder.entered.wait(5)
    others = [pool.submit(leased(adds("b"), 30)), pool.submit(leased(adds("c"), 60))]
    time.sleep(0.2)
    recorder.release()
    pool.shutdown(wait=True)
    for future in [first, *others]:
        future.result()
    assert recorder.leases[0] is None
    second = recorder.leases[1]
    assert second is not None and 25 < second <= 30


@pytest.mark.parametrize("linger_s", [0.0, 0.05])
def test_every_write_of_many_threads_is_applied_once(linger_s: float) -> None:
    recorder = Recorder(fail=lambda batch: time.sleep(0.002))  # a request takes time
    recorder.release()
    group = GroupCommit(recorder, linger_s=linger_s)
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda i: group.write(B, adds(f"w{i}")), range(200)))
    written = [path for batch in recorder.sent for path, _ in batch.adds]
    assert sorted(written) == sorted(f"w{i}" for i in range(200))
    assert group.writes == 200 and group.sent == len(recorder.sent) < 200
