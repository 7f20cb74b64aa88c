"""`LocalBucketStore`: buckets as directories under `BUCKETSYNC_DATA_DIR/buckets`.

Layout: `buckets/{ns}/{name}/bucket.json` (creator, private, created_at) and
`buckets/{ns}/{name}/files/…`. Bytes live once in `objects/{sha256}` and bucket files are
hard links to them, so copy-by-hash is a link, and every write is temp + fsync + rename.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from agenthub.bucketsync.errors import InvalidPath, StorageUnavailable
from agenthub.bucketsync.storage.base import Batch, BucketInfo, FileEntry
from agenthub.clock import Clock, SystemClock

_META = "bucket.json"


def _bucket_parts(bucket: str) -> tuple[str, str]:
    ns, _, name = bucket.partition("/")
    for part in (ns, name):
        if not part or part in (".", "..") or "/" in part or part.startswith("."):
            raise InvalidPath(f"bucket id {bucket!r} must look like 'namespace/name'")
    return ns, name


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class LocalBucketStore:
    def __init__(self, root: Path, *, clock: Clock | None = None, durable: bool = True) -> None:
        self._root = Path(root)
        # durable=False skips fsync: only for bulk-building throwaway fixtures (benchmarks).
        self._durable = durable
        self._clock = clock or SystemClock()
        self._objects = self._root / "objects"
        # (inode, mtime_ns, size) -> sha256; files are immutable once linked into place.
        self._hashes: dict[tuple[int, int, int], str] = {}
        self._hash_lock = threading.Lock()
        self.list_calls = 0
        self.read_many_calls = 0

    # -- layout -----------------------------------------------------------------------
    def _bucket_dir(self, bucket: str) -> Path:
        ns, name = _bucket_parts(bucket)
        return self._root / "buckets" / ns / name

    def _file_path(self, bucket: str, path: str) -> Path:
        parts = path.split("/")
        if any(p in ("", ".", "..") for p in parts) or path.startswith("/"):
            raise InvalidPath(f"path {path!r} is not a plain relative path")
        return self._bucket_dir(bucket) / "files" / Path(*parts)

    # -- port ---------------------------------------------------------------------------
    def info(self, bucket: str) -> BucketInfo | None:
        meta_path = self._bucket_dir(bucket) / _META
        try:
            meta = json.loads(meta_path.read_text("utf-8"))
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
        (directory / "files").mkdir(parents=True, exist_ok=True)
        meta = {
            "id": bucket,
            "creator": creator,
            "private": private,
            "created_at": self._clock.now().isoformat(),
        }
        self._atomic_write(directory / _META, json.dumps(meta).encode())
        info = self.info(bucket)
        assert info is not None
        return info

    def list(self, bucket: str, prefix: str = "", *, recursive: bool = True) -> list[FileEntry]:
        self.list_calls += 1
        base = self._bucket_dir(bucket) / "files"
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
                                entries.append(self._entry(base, Path(item.path), item.stat()))
                            except FileNotFoundError:
                                continue  # deleted while listing
        except OSError as exc:
            raise StorageUnavailable(f"could not list {bucket}/{prefix}: {exc}") from exc
        entries.sort(key=lambda e: e.path)
        return entries

    def read(self, bucket: str, path: str) -> bytes | None:
        try:
            return self._file_path(bucket, path).read_bytes()
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
        if self.info(bucket) is None:
            raise StorageUnavailable(f"bucket {bucket} does not exist")
        try:
            for _src_bucket, content_hash, dest in batch.copies:
                self._link_object(bucket, content_hash, dest)
            for dest, data in batch.adds:
                content_hash = self._store_object(data)
                self._link_object(bucket, content_hash, dest)
            for dest in batch.deletes:
                with contextlib.suppress(FileNotFoundError):
                    self._file_path(bucket, dest).unlink()
        except OSError as exc:
            raise StorageUnavailable(f"write to {bucket} failed: {exc}") from exc

    # -- internals -------------------------------------------------------------------------
    def _entry(self, base: Path, path: Path, st: os.stat_result | None = None) -> FileEntry:
        st = st or path.stat()
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self._hash_lock:
            content_hash = self._hashes.get(key)
        if content_hash is None:
            content_hash = hashlib.sha256(path.read_bytes()).hexdigest()
            with self._hash_lock:
                self._hashes[key] = content_hash
        return FileEntry(
            path=path.relative_to(base).as_posix(), size=st.st_size, content_hash=content_hash
        )

    def _store_object(self, data: bytes) -> str:
        content_hash = hashlib.sha256(data).hexdigest()
        target = self._objects / content_hash[:2] / content_hash
        if not target.exists():
            self._atomic_write(target, data)
        return content_hash

    def _link_object(self, bucket: str, content_hash: str, dest: str) -> None:
        source = self._objects / content_hash[:2] / content_hash
        if not source.exists():
            raise StorageUnavailable(f"no object with hash {content_hash} to copy")
        target = self._file_path(bucket, dest)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / f".tmp-{os.getpid()}-{threading.get_ident()}-{target.name}"
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        try:
            os.link(source, tmp)
        except OSError:
            # Filesystems without hard links: fall back to a copied file.
            self._atomic_write(target, source.read_bytes())
            return
        os.replace(tmp, target)
        if self._durable:
            _fsync_dir(target.parent)

    def _atomic_write(self, target: Path, data: bytes) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=".tmp-", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                if self._durable:
                    os.fsync(handle.fileno())
            os.replace(tmp_name, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name)
            raise
        if self._durable:
            _fsync_dir(target.parent)
