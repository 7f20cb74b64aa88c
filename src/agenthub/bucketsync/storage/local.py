"""`LocalBucketStore`: buckets as directories under `BUCKETSYNC_DATA_DIR/buckets`.

Layout: `buckets/{ns}/{name}/bucket.json` (creator, private, created_at) and
`buckets/{ns}/{name}/files/…`. Bytes live once in `objects/{sha256}` and bucket files are
hard links to them, so copy-by-hash is a link, and every write is temp + fsync + rename.

An object whose last bucket file is replaced or deleted is removed with it (its link count
drops to 1: only `objects/` holds it); `sweep()` removes what a crash or an earlier version
left behind — such objects, and `.tmp-{pid}-h{host}-…` files of processes that are gone
(this host's only: `diskfiles.abandoned`). `append`
grows a file in place (the audit log), detached from its object first.

`read_versioned`/`write_if` (the `ConditionalStore` capability) take an exclusive `flock`
on `locks/{sha256(bucket/path)}` around the compare and the write, so processes sharing
the data directory are serialized too; the version is the content's sha256.

`upload` takes a file of any size in pieces: they go to a `.tmp-{pid}-h{host}-up-…` file in the
bucket's directory (outside `files/`, so listings never see it) and are hashed as they
arrive; `commit` renames the temp file into `objects/` and links the path to it, like a
batch add, so memory stays bounded by one piece. Hashing a file for a listing and copying
on a filesystem without hard links read in pieces too; `stream` serves a file the same way.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from agenthub.bucketsync.errors import StorageUnavailable
from agenthub.bucketsync.storage.base import (
    Batch,
    BucketInfo,
    FileEntry,
    Versioned,
    bucket_parts,
    file_parts,
)
from agenthub.bucketsync.storage.diskfiles import (
    PIECE,
    abandoned,
    atomic_copy,
    atomic_write,
    fsync_dir,
    hash_file,
    make_parent,
    pieces,
    read_file,
    stat_if_present,
    temp_beside,
    temp_prefix,
    write_fd,
)
from agenthub.bucketsync.storage.localupload import LocalUpload
from agenthub.clock import Clock, SystemClock

_META = "bucket.json"
# Object removal and object reuse of the same hash take the same stripe.
_STRIPES = 64


@dataclass(frozen=True)
class SweepReport:
    objects_removed: int
    temps_removed: int


class LocalBucketStore:
    def __init__(self, root: Path, *, clock: Clock | None = None, durable: bool = True) -> None:
        self._root = Path(root)
        # durable=False skips fsync: only for bulk-building throwaway fixtures (benchmarks).
        self._durable = durable
        self._clock = clock or SystemClock()
        # Paths on the write path are plain strings: pathlib was a fifth of a post's time.
        self._objects = os.path.join(self._root, "objects")
        self._bucket_dirs: dict[str, str] = {}
        # (inode, mtime_ns, size) -> sha256; files are immutable once linked into place.
        self._hashes: dict[tuple[int, int, int], str] = {}
        self._hash_lock = threading.Lock()
        self._stripes = [threading.Lock() for _ in range(_STRIPES)]
        self._append_lock = threading.Lock()
        self.list_calls = 0
        self.read_many_calls = 0

    # -- layout -----------------------------------------------------------------------
    def _bucket_dir(self, bucket: str) -> str:
        directory = self._bucket_dirs.get(bucket)
        if directory is None:
            ns, name = bucket_parts(bucket)
            directory = self._bucket_dirs[bucket] = os.path.join(self._root, "buckets", ns, name)
        return directory

    def _file_path(self, bucket: str, path: str) -> str:
        return os.path.join(self._bucket_dir(bucket), "files", *file_parts(path))

    def _require(self, bucket: str) -> None:
        """A write's check that its bucket exists (one stat, not a parse of its metadata)."""
        if not os.path.isfile(os.path.join(self._bucket_dir(bucket), _META)):
            raise StorageUnavailable(f"bucket {bucket} does not exist")

    # -- port ---------------------------------------------------------------------------
    def info(self, bucket: str) -> BucketInfo | None:
        meta_path = os.path.join(self._bucket_dir(bucket), _META)
        try:
            with open(meta_path, encoding="utf-8") as handle:
                meta = json.loads(handle.read())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise StorageUnavailable(f"bucket metadata for {bucket} is unreadable: {exc}") from exc
        return BucketInfo(
            id=bucket,
            private=bool(meta.get("private", False)),
            created_at=datetime.fromisoformat(meta["created_at"]),
            creator=meta.get("creator"),
        )

    def create(self, bucket: str, *, creator: str, private: bool = False) -> BucketInfo:
        existing = self.info(bucket)
        if existing is not None:
            return existing
        directory = self._bucket_dir(bucket)
        os.makedirs(os.path.join(directory, "files"), exist_ok=True)
        meta = {
            "id": bucket,
            "creator": creator,
            "private": private,
            "created_at": self._clock.now().isoformat(),
        }
        atomic_write(
            os.path.join(directory, _META), json.dumps(meta).encode(), durable=self._durable
        )
        info = self.info(bucket)
        assert info is not None
        return info

    def list(self, bucket: str, prefix: str = "", *, recursive: bool = True) -> list[FileEntry]:
        self.list_calls += 1
        base = Path(self._bucket_dir(bucket), "files")
        folder = prefix.rstrip("/")
        start = base / folder if folder else base
        entries: list[FileEntry] = []
        if not start.is_dir():
            if folder and start.is_file():
                return [self._entry(base, start)]
            return entries
        stack = [start]
        try:
            while stack:
                current = stack.pop()
                with os.scandir(current) as it:
                    for item in it:
                        if item.name.startswith(".tmp-"):
                            continue
                        if item.is_dir(follow_symlinks=False):
                            if recursive:
                                stack.append(Path(item.path))
                        elif item.is_file(follow_symlinks=False):
                            try:
                                entries.append(self._entry(base, item.path, item.stat()))
                            except FileNotFoundError:
                                continue  # deleted while listing
        except OSError as exc:
            raise StorageUnavailable(f"could not list {bucket}/{prefix}: {exc}") from exc
        entries.sort(key=lambda e: e.path)
        return entries

    def read(self, bucket: str, path: str) -> bytes | None:
        try:
            return read_file(self._file_path(bucket, path))
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as exc:
            raise StorageUnavailable(f"could not read {bucket}/{path}: {exc}") from exc

    def read_many(self, bucket: str, paths: Sequence[str]) -> dict[str, bytes]:
        self.read_many_calls += 1
        found: dict[str, bytes] = {}
        for path in paths:
            data = self.read(bucket, path)
            if data is not None:
                found[path] = data
        return found

    def write_batch(self, bucket: str, batch: Batch) -> None:
        self._require(bucket)
        # Directories whose new entries are made durable once, when the batch is done: one
        # fsync per directory instead of one per file (a 2,000-file hash copy took ~8 s).
        dirty: set[str] = set()
        try:
            # An object is released outside its own stripe: two stripes are never held.
            for _src_bucket, content_hash, dest in batch.copies:
                with self._stripe(content_hash):
                    replaced = self._link_object(bucket, content_hash, dest, dirty)
                self._release(replaced)
            for dest, data in batch.adds:
                content_hash = hashlib.sha256(data).hexdigest()
                with self._stripe(content_hash):
                    self._store_object(data, content_hash)
                    replaced = self._link_object(bucket, content_hash, dest, dirty)
                self._release(replaced)
            for dest in batch.deletes:
                target = self._file_path(bucket, dest)
                last = self._last_reference(target)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(target)
                self._release(last)
        except OSError as exc:
            raise StorageUnavailable(f"write to {bucket} failed: {exc}") from exc
        finally:
            for directory in dirty:
                fsync_dir(directory)

    def append(self, bucket: str, path: str, data: bytes) -> None:
        """Append in place: O(len(data)), however long the file already is."""
        self._require(bucket)
        target = self._file_path(bucket, path)
        try:
            with self._append_lock:
                make_parent(target)
                self._detach(target)
                write_fd(
                    os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644),
                    data,
                    durable=self._durable,
                )
        except OSError as exc:
            raise StorageUnavailable(f"append to {bucket}/{path} failed: {exc}") from exc

    def read_versioned(self, bucket: str, path: str) -> Versioned | None:
        data = self.read(bucket, path)
        return None if data is None else Versioned(data, hashlib.sha256(data).hexdigest())

    def write_if(self, bucket: str, path: str, data: bytes, *, version: str | None) -> str | None:
        self._file_path(bucket, path)  # refuse a bad path before taking anything
        key = hashlib.sha256(f"{bucket}/{path}".encode()).hexdigest()
        lock_path = os.path.join(self._root, "locks", key[:2], key)
        make_parent(lock_path)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released with the descriptor
            current = self.read_versioned(bucket, path)
            if (None if current is None else current.version) != version:
                return None
            self.write_batch(bucket, Batch(adds=[(path, data)]))
            return hashlib.sha256(data).hexdigest()
        except OSError as exc:
            raise StorageUnavailable(f"conditional write to {bucket}/{path} failed: {exc}") from exc
        finally:
            os.close(fd)

    def upload(self, bucket: str, path: str) -> LocalUpload:
        """Start receiving `path` in pieces (`StreamingStore`)."""
        self._require(bucket)
        self._file_path(bucket, path)  # refuse a bad path before any byte is received
        temp = os.path.join(self._bucket_dir(bucket), f"{temp_prefix()}up-{uuid.uuid4().hex}")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError as exc:
            raise StorageUnavailable(f"cannot receive {bucket}/{path}: {exc}") from exc
        return LocalUpload(
            f"{bucket}/{path}",
            temp,
            fd,
            place=lambda content_hash: self._place_upload(bucket, path, temp, content_hash),
            durable=self._durable,
        )

    def stream(self, bucket: str, path: str, *, chunk_size: int = PIECE) -> Iterator[bytes] | None:
        """A file's bytes in pieces, or None if absent (`StreamingStore`). The open handle
        keeps reading the content it opened: a replacement is a rename, never a rewrite."""
        try:
            handle = open(self._file_path(bucket, path), "rb")  # noqa: SIM115 - closed by pieces()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as exc:
            raise StorageUnavailable(f"could not read {bucket}/{path}: {exc}") from exc
        return pieces(handle, chunk_size)

    def _place_upload(self, bucket: str, dest: str, temp: str, content_hash: str) -> FileEntry:
        """Move a received temp file into `objects/` (or drop it when the object exists) and
        link `dest` to it, under the hash's stripe as a batch add is."""
        dirty: set[str] = set()
        try:
            with self._stripe(content_hash):
                target = self._object_path(content_hash)
                if os.path.exists(target):
                    os.unlink(temp)
                else:
                    parent = make_parent(target)
                    os.replace(temp, target)
                    if self._durable:
                        dirty.add(parent)
                replaced = self._link_object(bucket, content_hash, dest, dirty)
            self._release(replaced)
            st = os.stat(self._file_path(bucket, dest))
        except OSError as exc:
            raise StorageUnavailable(f"write to {bucket}/{dest} failed: {exc}") from exc
        finally:
            for directory in dirty:
                fsync_dir(directory)
        with self._hash_lock:
            self._hashes[(st.st_ino, st.st_mtime_ns, st.st_size)] = content_hash
        return FileEntry(path=dest, size=st.st_size, content_hash=content_hash)

    def sweep(self, *, min_age_s: float = 60.0) -> SweepReport:
        """Remove objects no bucket file links to and temp files of dead processes, both
        older than `min_age_s` (a live write stores its object a moment before linking it)."""
        cutoff = time.time() - min_age_s
        objects = temps = 0
        store = Path(self._objects)
        if store.is_dir() and self._hard_links_work():
            for path in self._walk(store):  # what it lists, a live write may move
                st = None if path.name.startswith(".tmp-") else stat_if_present(path)
                if st is not None and st.st_nlink == 1 and st.st_mtime < cutoff:
                    with self._stripe(path.name), contextlib.suppress(FileNotFoundError):
                        if path.stat().st_nlink == 1:
                            path.unlink()
                            objects += 1
        for root in (store, self._root / "buckets"):
            for path in self._walk(root, temps_only=True):
                st = stat_if_present(path)
                if st and abandoned(path.name, st.st_mtime, cutoff=cutoff, now=time.time()):
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
                        temps += 1
        return SweepReport(objects_removed=objects, temps_removed=temps)

    # -- internals -------------------------------------------------------------------------
    def _entry(self, base: Path, path: Path | str, st: os.stat_result | None = None) -> FileEntry:
        # Plain strings, not pathlib: listing 2,000 files spent most of its time in pathlib.
        path = os.fspath(path)
        st = st or os.stat(path)
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self._hash_lock:
            content_hash = self._hashes.get(key)
        if content_hash is None:
            content_hash = hash_file(path)
            with self._hash_lock:
                self._hashes[key] = content_hash
        relative = path[len(os.fspath(base)) + 1 :].replace(os.sep, "/")
        return FileEntry(path=relative, size=st.st_size, content_hash=content_hash)

    def _stripe(self, content_hash: str) -> threading.Lock:
        return self._stripes[int(content_hash[:2], 16) % _STRIPES]

    def _object_path(self, content_hash: str) -> str:
        return os.path.join(self._objects, content_hash[:2], content_hash)

    def _store_object(self, data: bytes, content_hash: str) -> None:
        target = self._object_path(content_hash)
        if not os.path.exists(target):
            atomic_write(target, data, durable=self._durable)

    def _last_reference(self, target: str) -> str | None:
        """The object hash of `target` if `target` is its only bucket file (link count 2:
        the file and the object), so replacing or deleting it orphans the object."""
        try:
            st = os.stat(target)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if st.st_nlink != 2:
            return None
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self._hash_lock:
            known = self._hashes.get(key)
        return known or hash_file(target)

    def _release(self, content_hash: str | None) -> None:
        if content_hash is None:
            return
        source = self._object_path(content_hash)
        with self._stripe(content_hash), contextlib.suppress(FileNotFoundError):
            if os.stat(source).st_nlink == 1:
                os.unlink(source)

    def _detach(self, target: str) -> None:
        """Give a file linked to an object its own inode before it is changed in place."""
        last = self._last_reference(target)
        try:
            linked = os.stat(target).st_nlink > 1
        except FileNotFoundError:
            return
        if linked:
            atomic_copy(target, target, durable=self._durable)
            self._release(last)

    def _walk(self, root: Path, *, temps_only: bool = False) -> Iterator[Path]:
        stack = [root]
        while stack:
            current = stack.pop()
            try:
                with os.scandir(current) as it:
                    for item in it:
                        if item.is_dir(follow_symlinks=False):
                            stack.append(Path(item.path))
                        elif not temps_only or item.name.startswith(".tmp-"):
                            yield Path(item.path)
            except FileNotFoundError:
                continue

    def _hard_links_work(self) -> bool:
        probe = Path(self._objects, f"{temp_prefix()}probe")
        try:
            probe.write_bytes(b"")
            os.link(probe, probe.with_name(probe.name + "-link"))
        except OSError:
            return False
        finally:
            for path in (probe, probe.with_name(probe.name + "-link")):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        return True

    def _link_object(
        self, bucket: str, content_hash: str, dest: str, dirty: set[str]
    ) -> str | None:
        """Link `dest` to the object; returns the hash of the object it replaced if that
        object may now be unreferenced (for `_release`, outside this hash's stripe)."""
        source = self._object_path(content_hash)
        if not os.path.exists(source):
            raise StorageUnavailable(f"no object with hash {content_hash} to copy")
        target = self._file_path(bucket, dest)
        parent = make_parent(target)
        last = self._last_reference(target)
        if last == content_hash:
            return None  # already this content
        tmp = temp_beside(target)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        try:
            os.link(source, tmp)
        except OSError:
            # Filesystems without hard links: fall back to a copied file.
            atomic_copy(source, target, durable=self._durable)
            return None
        os.replace(tmp, target)
        if self._durable:
            dirty.add(parent)
        return last
