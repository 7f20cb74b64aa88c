"""A model-based test of the multi-folder streams (issue 31.1), in process, no servers.

Hypothesis drives random interleavings of: stamps issued on one of two workers before
their writes are visible; writes landing (a mention in one or two inboxes, a broadcast, a
channel post at `notify: all`); the bus delivering each worker's folder events and marks
to the other at random moments (so one worker's read model lags the other's); watchers
reading pages of their union at random moments on either worker, with one persisted
cursor each; the clock moving; and a worker being killed and restarted (its unfinished
writes never land; its last mark stays with the other until the peer lease ends).

The parts are the real ones: `StampIssuer` (one per worker), `ReadModel` over one
`LocalBucketStore`, and `listing.page` with the watermark as `bound`. Checked: a watcher's
cursor never passes an item addressed to it that has landed and it has not received
(that skip is permanent), and after the drain each watcher's concatenated pages are
exactly the items addressed to it, ascending, each once.

The same machine without the bound is the broken variant: hypothesis must find a skip."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from agenthub.bucketsync.core import listing
from agenthub.bucketsync.core.readmodel import ReadModel
from agenthub.bucketsync.core.stamps import CATCH_UP_AHEAD_S, PEER_LEASE_S, StampIssuer
from agenthub.bucketsync.storage.base import Batch, FileEntry
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock

BUCKET = "org/central"
TOPS = ("inbox/", "broadcasts/", "channels/")
WATCHERS: dict[str, tuple[str, ...]] = {
    # Each watcher's union of folders, as /v1/updates composes it.
    "agent-1": ("inbox/agent-1/", "broadcasts/", "channels/evals/"),
    "agent-2": ("inbox/agent-2/", "broadcasts/"),
}
KINDS: dict[str, tuple[str, ...]] = {
    "mention-1": ("inbox/agent-1/",),
    "mention-2": ("inbox/agent-2/",),
    "mention-both": ("inbox/agent-1/", "inbox/agent-2/"),
    "broadcast": ("broadcasts/",),
    "channel": ("channels/evals/",),
}
AUTHORS = ("agent-3", "agent-4", "human-boss")


@dataclass
class Worker:
    origin: str
    issuer: StampIssuer
    model: ReadModel
    inbox: list[tuple[str, Any]] = field(default_factory=list)  # bus events, in order
    pending: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)  # issued


class Streams(RuleBasedStateMachine):
    bounded = True  # the broken variant turns the watermark off

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="stream-model-"))
        self.store = LocalBucketStore(self.root, durable=False)
        self.store.create(BUCKET, creator="model")
        self.clock = FrozenClock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
        self.claimed: set[tuple[str, str]] = set()
        self.generation = 0
        self.workers = [self._start(), self._start()]
        # The same assumption as `restart`: each worker's hello reaches every worker before
        # the first stamp (the fresh-worker gap of issue 31.1 is this window; hypothesis
        # finds a skip in it when the hellos are left in flight).
        for worker in self.workers:
            self._publish(worker, frozenset())
        for worker in self.workers:
            self.deliver_all(worker)
        self.addressed: dict[str, set[str]] = {handle: set() for handle in WATCHERS}
        self.landed: set[str] = set()
        self.delivered: dict[str, list[str]] = {handle: [] for handle in WATCHERS}
        self.cursor: dict[str, str | None] = {handle: None for handle in WATCHERS}

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    # -- the bus ------------------------------------------------------------------------
    def _start(self) -> Worker:
        self.generation += 1

        def claim(author: str, stamp: str) -> bool:  # the shared (Redis) claim
            if (author, stamp) in self.claimed:
                return False
            self.claimed.add((author, stamp))
            return True

        worker = Worker(
            origin=f"w{self.generation}",
            issuer=StampIssuer(self.clock, shared_claim=claim),
            model=ReadModel(
                self.store, BUCKET, self.clock, ttl_s=3600, content_cache_max_bytes=1 << 20
            ),
        )
        for top in TOPS:
            worker.model.register_folder(top)
        return worker

    def _publish(self, sender: Worker, folders: frozenset[str]) -> None:
        """One bus message (Redis orders them): the folders changed and the sender's mark
        as of now; every subscriber, the sender too, gets it in order."""
        event = (sender.origin, (folders, sender.issuer.mark()))
        for worker in self.workers:
            worker.inbox.append(event)

    @rule(index=st.integers(0, 1), count=st.integers(1, 3))
    def deliver_bus(self, index: int, count: int) -> None:
        worker = self.workers[index]
        for _ in range(min(count, len(worker.inbox))):
            origin, (folders, mark) = worker.inbox.pop(0)
            for folder in folders:  # as RedisBus._dispatch: folders first, then the mark
                worker.model.invalidate(folder)
            worker.issuer.observe(origin, mark)

    @rule(index=st.integers(0, 1))
    def publish_mark(self, index: int) -> None:
        self._publish(self.workers[index], frozenset())

    @rule(ms=st.integers(0, 3))
    def tick(self, ms: int) -> None:
        self.clock.advance(ms / 1000)

    # -- writes -------------------------------------------------------------------------
    @rule(
        index=st.integers(0, 1),
        author=st.sampled_from(AUTHORS),
        kind=st.sampled_from(sorted(KINDS)),
    )
    def issue(self, index: int, author: str, kind: str) -> None:
        worker = self.workers[index]
        filename = f"{worker.issuer.issue(author)}_{author}.md"
        worker.pending.append((filename, KINDS[kind]))

    @precondition(lambda self: any(worker.pending for worker in self.workers))
    @rule(data=st.data())
    def land(self, data: st.DataObject) -> None:
        worker = data.draw(st.sampled_from([w for w in self.workers if w.pending]))
        self._land(worker, data.draw(st.integers(0, len(worker.pending) - 1)))

    def _land(self, worker: Worker, position: int) -> None:
        """A write becomes visible as `Hub.write_central` makes it: stored, written through
        to its worker's read model, the folders announced, then its stamp settled."""
        filename, folders = worker.pending.pop(position)
        body = f"---\nagent: {filename}\n---\nhello\n".encode()
        adds = [(folder + filename, body) for folder in folders]
        self.store.write_batch(BUCKET, Batch(adds=adds))
        for path, raw in adds:
            digest = hashlib.sha256(raw).hexdigest()
            worker.model.write_through(_top(path), FileEntry(path, len(raw), digest), raw)
        self._publish(worker, frozenset(_top(path) for path, _raw in adds))
        worker.issuer.settle([filename])
        self.landed.add(filename)
        for handle, union in WATCHERS.items():
            if set(folders) & set(union):
                self.addressed[handle].add(filename)

    @rule(index=st.integers(0, 1))
    def restart(self, index: int) -> None:
        """kill -9 and start again: the dead worker's unfinished writes never land (their
        clients retry, with new stamps); its last mark stays with the other worker until
        the peer lease ends; the new worker's hello reaches every worker before it issues
        a stamp (ASSUMED here: `RedisBus.start` publishes it but does not yet wait for the
        others to have applied it — the known fresh-worker gap of issue 31.1).

        ALSO ASSUMED: the restart takes longer than the furthest any floor can run ahead of
        the clock (CATCH_UP_AHEAD_S). A new issuer remembers no stamp of the old one, so a
        restart within that time can issue a stamp below one already delivered — the same
        open gap (hypothesis found it with a frozen clock: w1 issued ...-001, a restart on
        the same millisecond issued ...-000 for another author)."""
        self.clock.advance(CATCH_UP_AHEAD_S + 0.001)
        fresh = self._start()
        self.workers[index] = fresh
        self._publish(fresh, frozenset())
        for worker in self.workers:  # the hello reaches every worker before a stamp
            self.deliver_all(worker)

    def deliver_all(self, worker: Worker) -> None:
        while worker.inbox:
            self.deliver_bus(self.workers.index(worker), len(worker.inbox))

    # -- reads --------------------------------------------------------------------------
    @rule(
        handle=st.sampled_from(sorted(WATCHERS)), index=st.integers(0, 1), limit=st.integers(1, 4)
    )
    def read(self, handle: str, index: int, limit: int) -> None:
        worker = self.workers[index]
        bound = worker.issuer.watermark() if self.bounded else None  # before the listings
        paths: dict[str, str] = {}
        for folder in WATCHERS[handle]:
            for path in worker.model.entries(_top(folder)):
                if path.startswith(folder) and path.count("/") == folder.count("/"):
                    paths[path.rsplit("/", 1)[-1]] = path
        listed = listing.Listed(keys=sorted(paths), paths=paths, count=len(paths))
        page = listing.page(
            listed,
            listing.ListQuery(order="asc", after=self.cursor[handle], limit=limit),
            load=lambda _paths: {},
            render=lambda key, _record: {"key": key},
            bound=bound,
        )
        self.delivered[handle].extend(page["items"])
        self.cursor[handle] = page["cursor"] or self.cursor[handle]

    # -- the checks ---------------------------------------------------------------------
    @invariant()
    def nothing_behind_a_cursor_is_missing(self) -> None:
        for handle, cursor in self.cursor.items():
            if cursor is None:
                continue
            missed = {
                key
                for key in self.addressed[handle] & self.landed
                if key <= cursor and key not in self.delivered[handle]
            }
            assert not missed, f"{handle}'s cursor {cursor} passed {sorted(missed)} for good"

    @invariant()
    def pages_are_ascending_and_once(self) -> None:
        for items in self.delivered.values():
            assert items == sorted(set(items))

    @rule()
    def drain(self) -> None:
        """Every unfinished write lands, the dead workers' marks expire, every worker's mark
        goes round, and every watcher reads to the end: it has exactly its items."""
        for worker in self.workers:
            while worker.pending:
                self._land(worker, 0)
        self.clock.advance(PEER_LEASE_S + 1)
        for index in range(len(self.workers)):
            self.publish_mark(index)
        for worker in self.workers:
            self.deliver_all(worker)
        for handle in WATCHERS:
            for index in range(len(self.workers)):
                before = -1
                while before != len(self.delivered[handle]):
                    before = len(self.delivered[handle])
                    self.read(handle, index, 50)
            assert self.delivered[handle] == sorted(self.addressed[handle]), handle


def _top(path: str) -> str:
    return path.split("/", 1)[0] + "/"


class UnboundedStreams(Streams):
    bounded = False


MODEL = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def test_every_watcher_gets_its_items_in_order_once() -> None:
    run_state_machine_as_test(Streams, settings=MODEL)  # type: ignore[no-untyped-call]


def test_broken_variant_without_the_bound_skips_an_item() -> None:
    with pytest.raises(AssertionError, match=r"passed|agent-"):
        # Generation only: the first skip found is the proof (shrinking it costs minutes).
        broken = settings(MODEL, max_examples=400, phases=[Phase.generate], database=None)
        run_state_machine_as_test(UnboundedStreams, settings=broken)  # type: ignore[no-untyped-call]
