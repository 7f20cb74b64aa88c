"""The `BucketStore` port: what bucket-sync needs from a bucket backend.

Adapters: `local.LocalBucketStore` (directories), `hf.HfBucketStore` (huggingface_hub
2.x) and `s3.S3BucketStore` (S3-compatible object storage through obstore). Adapters
translate vendor failures into `StorageUnavailable` (retryable) and report absence as
`None`/empty results, never as an exception.

A `FileEntry.content_hash` is a digest of the bytes that is equal for equal bytes within
one store (sha256 locally, the Xet hash on HF, the ETag on S3); a `Batch` copy names a
hash the source bucket's listing gave.

`ConditionalStore` is an optional capability: compare-and-swap on one file, so state
several processes update (an index, a ledger, a queue) can be serialized without a lock.
The local and S3 stores have it; HF buckets have no conditional writes, so the hf adapter
does not (`isinstance(store, ConditionalStore)` tells).

`ChangeFeed` is a bucket's change feed (the Hub's `/events`, `storage.hffeed`): the read
model applies its `FileChange` batches instead of re-listing, while `live()` says the feed
can be trusted. `RequestBudget` is the token's Hub request budget (`storage.governor`);
`HUB_PRIORITY` tells it what a Hub call is for, so writes are served first.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from agenthub.bucketsync.errors import InvalidPath, StorageUnavailable


@dataclass(frozen=True)
class BucketInfo:
    id: str
    private: bool
    created_at: datetime
    creator: str | None = None  # None when the backend does not know who created it


@dataclass(frozen=True)
class FileEntry:
    path: str
    size: int
    content_hash: str


@dataclass
class Batch:
    """One batch write. Not transactional on HF: adapters apply copies, then adds in list
    order, then deletes, so callers order adds to make partial failure harmless."""

    adds: list[tuple[str, bytes]] = field(default_factory=list)
    copies: list[tuple[str, str, str]] = field(default_factory=list)  # (src bucket, hash, dest)
    deletes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.adds) + len(self.copies) + len(self.deletes)


class BucketStore(Protocol):
    def info(self, bucket: str) -> BucketInfo | None:
        """Bucket metadata, or None if the bucket does not exist."""
        ...

    def create(self, bucket: str, *, creator: str, private: bool = False) -> BucketInfo:
        """Create a bucket owned by `creator` (idempotent for the same creator)."""
        ...

    def list(self, bucket: str, prefix: str = "", *, recursive: bool = True) -> list[FileEntry]:
        """Files under `prefix` (a folder, matched on whole path components)."""
        ...

    def read(self, bucket: str, path: str) -> bytes | None:
        """A file's bytes, or None if absent (or the bucket is absent)."""
        ...

    def read_many(self, bucket: str, paths: Sequence[str]) -> dict[str, bytes]:
        """Several files in one backend call; absent paths are left out."""
        ...

    def write_batch(self, bucket: str, batch: Batch) -> None:
        """Apply a batch of adds, hash copies and deletes."""
        ...


@runtime_checkable
class AppendableStore(BucketStore, Protocol):
    """A store that can append to a file in place (the local store; HF buckets cannot)."""

    def append(self, bucket: str, path: str, data: bytes) -> None:
        """Append `data` to `path` (created if absent); durable when it returns."""
        ...


@dataclass(frozen=True)
class Versioned:
    """A file's bytes and the version a conditional write names to replace them."""

    data: bytes
    version: str


@runtime_checkable
class ConditionalStore(BucketStore, Protocol):
    """A store with compare-and-swap on one file (S3: If-None-Match / If-Match on the ETag;
    local: a per-file lock and the content hash). Only writes made through `write_if` are
    serialized against each other."""

    def read_versioned(self, bucket: str, path: str) -> Versioned | None:
        """The file and its version, or None if it is absent."""
        ...

    def write_if(self, bucket: str, path: str, data: bytes, *, version: str | None) -> str | None:
        """Write `data` only if the file is still at `version` (None: only if it is absent).
        Returns the new version, or None when another writer got there first (nothing was
        written)."""
        ...


@dataclass(frozen=True)
class FileChange:
    """One file changed in a bucket, as its change feed reported it. `size` and
    `content_hash` are None when the feed did not repeat them (an update carries only what
    changed); a consumer that cannot complete the entry re-lists its folder."""

    path: str
    deleted: bool = False
    size: int | None = None
    content_hash: str | None = None


class FeedSink(Protocol):
    """What a change feed reports to (the read model's follower, `core.following`)."""

    def changed(self, changes: list[FileChange]) -> None:
        """A batch of changes, in the order the bucket applied them."""
        ...

    def reconcile(self) -> None:
        """The feed lost track (a first subscription, a `reset`): drop what was derived
        from earlier listings; `live()` is False until the feed has caught up again."""
        ...

    def ready(self, *, from_scratch: bool) -> None:
        """The feed is live: every change from now on will be reported. `from_scratch`:
        the session began without a resume point (after `reconcile`)."""
        ...


class ChangeFeed(Protocol):
    """A bucket's change feed, followed on a thread of its own."""

    def start(self, sink: FeedSink) -> None:
        """Start following; changes go to `sink` from the feed's thread."""
        ...

    def live(self) -> bool:
        """True while a stream is open, caught up and recently heard from: listings kept up
        to date by its changes need no TTL refresh. False means: fall back to the TTL."""
        ...

    def stop(self) -> None: ...

    def stats(self) -> dict[str, Any]:
        """Counters for `/v1/healthz`."""
        ...


# What a Hub call is for, so a budget spends on writes first: a `write` (the default, and
# anything a write path reads), a `read` a GET answers from (a listing or record the read
# model lacks), or a `refresh` of a listing the read model holds (served stale instead).
HubPriority = Literal["write", "read", "refresh"]
HUB_PRIORITY: ContextVar[HubPriority] = ContextVar("bucketsync_hub_priority", default="write")


class RequestBudget(Protocol):
    """The token's Hub request budget (`storage.governor.HubGovernor`)."""

    def may_refresh(self) -> bool:
        """Whether a TTL refresh may spend a request now; False (counted as shed): serve
        the cached listing a while longer."""
        ...

    def report(self) -> dict[str, Any]:
        """`window_s`, `used`, `limit`, `shed`, `refused` for `/v1/healthz`."""
        ...


def compare_and_swap(
    store: ConditionalStore,
    bucket: str,
    path: str,
    change: Callable[[bytes | None], bytes],
    *,
    attempts: int = 20,
) -> bytes:
    """Read `path`, apply `change` to its bytes (None when absent) and write the result if
    nobody wrote in between; otherwise read again and retry. Returns what was written.
    `change` may run several times, so it must only compute."""
    for _ in range(attempts):
        current = store.read_versioned(bucket, path)
        data = change(None if current is None else current.data)
        if store.write_if(bucket, path, data, version=None if current is None else current.version):
            return data
    raise StorageUnavailable(
        f"{bucket}/{path}: {attempts} concurrent writers in a row won the race",
        hint="retry in a few seconds",
    )


def bucket_parts(bucket: str) -> tuple[str, str]:
    """`namespace/name` split in two, each a plain path component."""
    ns, _, name = bucket.partition("/")
    for part in (ns, name):
        if not part or part in (".", "..") or "/" in part or part.startswith("."):
            raise InvalidPath(f"bucket id {bucket!r} must look like 'namespace/name'")
    return ns, name


def file_parts(path: str) -> list[str]:
    """A bucket file path's components; refuses absolute paths, `.`, `..` and empty parts."""
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts) or path.startswith("/"):
        raise InvalidPath(f"path {path!r} is not a plain relative path")
    return parts


class Upload(Protocol):
    """One file being received in pieces: nothing is visible at its path until `commit`."""

    size: int

    def write(self, chunk: bytes) -> None:
        """Append a piece (to a temp file, never to memory)."""
        ...

    def commit(self) -> FileEntry:
        """Place the file atomically at its path; returns what now lives there."""
        ...

    def abort(self) -> None:
        """Drop what was received; the path keeps its previous content (idempotent)."""
        ...


@runtime_checkable
class StreamingStore(BucketStore, Protocol):
    """A store that takes and serves files of any size in pieces, with bounded memory (the
    local store, whose `/local/buckets` API carries submissions of gigabytes)."""

    def upload(self, bucket: str, path: str) -> Upload:
        """Start receiving `path` of an existing bucket."""
        ...

    def stream(
        self, bucket: str, path: str, *, chunk_size: int = 1 << 20
    ) -> Iterator[bytes] | None:
        """A file's bytes in pieces, or None if absent."""
        ...


class WholeFileUpload:
    """An `Upload` for a store that writes whole files (S3 without multipart): pieces are
    received into a temp file on disk, and `commit` writes the file in one batch. Memory
    is bounded while receiving; the commit holds the file once."""

    def __init__(self, store: BucketStore, bucket: str, path: str) -> None:
        self._store, self._bucket, self._path = store, bucket, path
        self._spool = tempfile.TemporaryFile()  # noqa: SIM115 - closed by commit/abort
        self.size = 0

    def write(self, chunk: bytes) -> None:
        self._spool.write(chunk)
        self.size += len(chunk)

    def commit(self) -> FileEntry:
        try:
            self._spool.seek(0)
            self._store.write_batch(self._bucket, Batch(adds=[(self._path, self._spool.read())]))
        finally:
            self.abort()
        placed = [e for e in self._store.list(self._bucket, self._path) if e.path == self._path]
        if not placed:
            raise StorageUnavailable(f"{self._bucket}/{self._path} was written but is not listed")
        return placed[0]

    def abort(self) -> None:
        self._spool.close()


def stream_whole(
    store: BucketStore, bucket: str, path: str, *, chunk_size: int = 1 << 20
) -> Iterator[bytes] | None:
    """`StreamingStore.stream` for a store that reads whole files."""
    data = store.read(bucket, path)
    if data is None:
        return None
    return (data[i : i + chunk_size] for i in range(0, len(data), chunk_size))


def read_json_object(store: BucketStore, bucket: str, path: str) -> dict[str, Any] | None:
    """A JSON object file (a status, a ledger entry, a summary), or None when it is absent,
    unreadable, or not an object."""
    data = store.read(bucket, path)
    if data is None:
        return None
    try:
        parsed = json.loads(data)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None
