"""Group commit: concurrent batch writes to one bucket share ONE Hub batch request.

Every post, result and registration writes a few small batches (the journal entry, the
central files, the audit row with the answer). On the Hub each batch is a rate-limited API
request, so 200 agents posting once a minute would spend the org's 3,000 requests per
5 minutes on bookkeeping alone. Here the writers of one bucket take turns as leader:

    a writer queues its batch; if no leader is running for the bucket it becomes one;
    the leader lingers `linger_s` when the bucket was written within `busy_s` (a fleet is
    writing: wait for company), and not at all when it was idle (a lone write goes now);
    it then merges the queue into one `Batch` and sends it, while writers arriving
    meanwhile queue for the next one, and hands the lead to the first of them.

A writer returns only once the batch holding its write was applied (an acknowledged write
is in the Hub before its 200), and gets the outcome of its own paths: the merged batch's
failure whole, or of a `PartialWrite` only the paths it wrote (none: it succeeded).
Merging keeps each writer's order (the Hub applies copies, then adds in order, then
deletes), and a write touching a path another queued write touches waits for the next
batch, so merging never reorders two writes of one path.

A leader sends under the earliest lease any of its writers holds (`deadlines`), so no
write runs past the lock a writer holds around it.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from agenthub.bucketsync import deadlines
from agenthub.bucketsync.errors import PartialWrite
from agenthub.bucketsync.storage.base import Batch

# A batch of the Hub takes thousands of operations; a group stays well under that.
MAX_GROUP_OPERATIONS = 1000


@dataclass(eq=False)
class _Write:
    batch: Batch
    until: float | None  # the writer's lease (monotonic), if it holds one
    wake: threading.Event = field(default_factory=threading.Event)
    finished: bool = False
    error: BaseException | None = None

    @property
    def paths(self) -> set[str]:
        return (
            {path for path, _ in self.batch.adds}
            | {dest for _, _, dest in self.batch.copies}
            | set(self.batch.deletes)
        )


def merge(batches: list[Batch]) -> Batch:
    """One batch applying every batch's operations, each batch's in its own order."""
    merged = Batch()
    for batch in batches:
        merged.adds.extend(batch.adds)
        merged.copies.extend(batch.copies)
        merged.deletes.extend(batch.deletes)
    return merged


class GroupCommit:
    """Coalesces `write(bucket, batch)` calls of concurrent threads into `send` calls."""

    def __init__(
        self,
        send: Callable[[str, Batch], None],
        *,
        linger_s: float,
        busy_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self.linger_s = linger_s
        self.busy_s = busy_s
        self._clock = clock
        self._lock = threading.Lock()
        self._queues: dict[str, list[_Write]] = {}
        self._leading: set[str] = set()
        self._last_sent: dict[str, float] = {}
        self.sent = 0  # batches sent (figures for the bench)
        self.writes = 0  # writes they carried

    def write(self, bucket: str, batch: Batch) -> None:
        """Apply `batch` to `bucket`, in a batch shared with concurrent writers."""
        remaining = deadlines.remaining()
        mine = _Write(batch, None if remaining is None else time.monotonic() + remaining)
        with self._lock:
            self._queues.setdefault(bucket, []).append(mine)
            lead = bucket not in self._leading
            if lead:
                self._leading.add(bucket)
        if lead:
            self._lead(bucket)
        while not mine.finished:
            mine.wake.wait()
            mine.wake.clear()
            if not mine.finished:  # handed the lead: the queue starts with this write
                self._lead(bucket)
        if mine.error is not None:
            raise mine.error

    def _lead(self, bucket: str) -> None:
        with self._lock:
            busy = self._clock() - self._last_sent.get(bucket, float("-inf")) < self.busy_s
        if busy and self.linger_s > 0:
            time.sleep(self.linger_s)
        with self._lock:
            group = self._take(bucket)
        try:
            self._flush(bucket, group)
        finally:
            with self._lock:
                self._last_sent[bucket] = self._clock()
                queue = self._queues.get(bucket)
                if queue:
                    queue[0].wake.set()  # the next leader
                else:
                    self._queues.pop(bucket, None)
                    self._leading.discard(bucket)

    def _take(self, bucket: str) -> list[_Write]:
        """The longest prefix of the queue whose writes touch disjoint paths."""
        queue = self._queues[bucket]
        group: list[_Write] = []
        touched: set[str] = set()
        operations = 0
        for write in queue:
            paths = write.paths
            if group and (paths & touched or operations + len(write.batch) > MAX_GROUP_OPERATIONS):
                break
            group.append(write)
            touched |= paths
            operations += len(write.batch)
        del queue[: len(group)]
        return group

    def _flush(self, bucket: str, group: list[_Write]) -> None:
        leases = [w.until - time.monotonic() for w in group if w.until is not None]
        try:
            if leases:
                with deadlines.within(min(leases)):
                    self._send(bucket, merge([w.batch for w in group]))
            else:
                self._send(bucket, merge([w.batch for w in group]))
        except PartialWrite as exc:
            failed = set(exc.failed)
            for write in group:
                mine = sorted(write.paths & failed)
                if mine:
                    write.error = PartialWrite(
                        exc.message, failed=mine, hint=exc.hint or "retry; writes are idempotent"
                    )
        except BaseException as exc:  # every writer of the batch gets its failure
            for index, write in enumerate(group):
                write.error = exc if index == 0 else copy.copy(exc)
        with self._lock:
            self.sent += 1
            self.writes += len(group)
        for write in group:
            write.finished = True
            write.wake.set()
