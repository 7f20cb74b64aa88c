"""Shared files: the few files every worker read-modify-writes (the verification index,
the job-quota ledger, the scoring queue) and how their edits are serialized.

    for edit in edits(hub, bucket, path, lock_name):
        data = edit.data            # the file as stored now (None: absent)
        ...compute, from `data` only...
        edit.write(new_bytes)       # or no write: the file is left as it is

- Locked (local and HF stores): one pass under the named lock `lock_name` (an flock on
  the data directory, or Redis with the bus), its write fenced through the lease
  (`core.locks`).
- Swapped (`Hub.swaps`: S3, where processes on several machines share the bucket and no
  lock): no lock. Each pass reads the file with its version and `write` is a conditional
  write (If-Match on the version read, If-None-Match when it was absent); when another
  writer got there first the pass is lost and the loop runs again on what they wrote.
  So a pass must only compute: anything it does besides `write` may run several times.

A pass that ends without `write`, or whose write landed, ends the loop; `attempts` lost
passes in a row are a retryable `StorageUnavailable`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator

from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.locks import Lease
from agenthub.bucketsync.errors import StorageUnavailable
from agenthub.bucketsync.storage.base import Batch, ConditionalStore

ATTEMPTS = 30


class Edit(ABC):
    """One pass over a shared file: what it holds now, and the write that replaces it."""

    def __init__(self, data: bytes | None) -> None:
        self.data = data
        self.written: bytes | None = None
        self.lost = False

    @abstractmethod
    def write(self, body: bytes) -> None:
        """Replace the file with `body` (a lost race sets `lost` and writes nothing)."""


class _LockedEdit(Edit):
    def __init__(self, hub: Hub, bucket: str, path: str, lease: Lease, data: bytes | None) -> None:
        super().__init__(data)
        self._hub, self._bucket, self._path, self._lease = hub, bucket, path, lease

    def write(self, body: bytes) -> None:
        hub, bucket, path = self._hub, self._bucket, self._path
        if bucket == hub.central:
            self._lease.write(lambda: hub.write_central([(path, body)]))
        else:
            self._lease.write(lambda: hub.store.write_batch(bucket, Batch(adds=[(path, body)])))
        self.written = body


class _SwappedEdit(Edit):
    def __init__(
        self,
        hub: Hub,
        store: ConditionalStore,
        bucket: str,
        path: str,
        data: bytes | None,
        version: str | None,
    ) -> None:
        super().__init__(data)
        self._hub, self._store = hub, store
        self._bucket, self._path, self._version = bucket, path, version

    def write(self, body: bytes) -> None:
        if self._store.write_if(self._bucket, self._path, body, version=self._version) is None:
            self.lost = True
            return
        if self._bucket == self._hub.central:
            self._hub.wrote_central([(self._path, body)])
        self.written = body


def edits(hub: Hub, bucket: str, path: str, lock_name: str) -> Iterator[Edit]:
    """The passes of one edit of `bucket/path` (see the module docstring)."""
    store = hub.store
    if not hub.swaps or not isinstance(store, ConditionalStore):
        with hub.locks.hold(lock_name) as lease:
            yield _LockedEdit(hub, bucket, path, lease, hub.store.read(bucket, path))
        return
    for _ in range(ATTEMPTS):
        current = store.read_versioned(bucket, path)
        edit = _SwappedEdit(
            hub,
            store,
            bucket,
            path,
            None if current is None else current.data,
            None if current is None else current.version,
        )
        yield edit
        if not edit.lost:
            return
    raise StorageUnavailable(
        f"{bucket}/{path}: {ATTEMPTS} concurrent writers in a row changed it first; "
        "nothing was written",
        hint="retry in a few seconds",
    )
