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
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

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
