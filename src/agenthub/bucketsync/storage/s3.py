"""`S3BucketStore`: the BucketStore port on S3-compatible object storage (AWS S3, GCS's
XML API, Cloudflare R2, MinIO) through obstore.

Layout: every bucket id `namespace/name` lives in ONE S3 bucket, under
`{BUCKETSYNC_S3_PREFIX}buckets/{namespace}/{name}/`: `bucket.json` (creator, private,
created_at) and `files/{path}`. Several bucket-sync processes, on any machines, pointed at
the same S3 bucket and prefix share every bucket.

- Content hash: the object's ETag (unquoted). Puts are single-part, so on AWS, R2, MinIO and
  GCS it is the MD5 of the bytes, equal for equal bytes.
- Copy by hash: the source bucket's file with that ETag is found (this process's last
  listing of it, checked with one HEAD, else a fresh listing) and copied server-side.
- `ConditionalStore`: `write_if` is a PUT with If-None-Match: * (create) or If-Match: <ETag>
  (replace); a 412 answers None. Needs a store that honours both (AWS S3 since 2024, R2,
  MinIO, GCS; moto).
- Nothing to sweep: no temp files and no unreferenced objects exist.

Failures: a refusal (401/403, a bad request) is `StorageUnavailable` with nothing applied;
any other failure of a write may have reached the store, so it is `WriteOutcomeUnknown`
(writes are sent once: a retried conditional PUT could read its own success as a
conflict), unless the connection never opened. Reads retry within the deadline.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any, TypeVar

import obstore
from obstore.exceptions import (
    AlreadyExistsError,
    BaseError,
    PermissionDeniedError,
    PreconditionError,
    UnauthenticatedError,
)
from obstore.store import S3Store

from agenthub.bucketsync import deadlines
from agenthub.bucketsync.errors import StorageUnavailable, WriteOutcomeUnknown
from agenthub.bucketsync.storage.base import (
    Batch,
    BucketInfo,
    FileEntry,
    Versioned,
    bucket_parts,
    file_parts,
)
from agenthub.clock import Clock, SystemClock

T = TypeVar("T")

_META = "bucket.json"
RETRY_HINT = "retry in a few seconds"
_READERS = 8  # concurrent GETs of one read_many


@dataclass(frozen=True)
class S3Config:
    """Where the store is; credentials left None come from the usual AWS variables
    (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, an instance role)."""

    bucket: str
    prefix: str = ""
    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    deadline_s: float = 15.0


def _first_line(exc: BaseException) -> str:
    return str(exc).split("\n", 1)[0][:300]


def _etag(meta: Any) -> str:
    return str(meta.get("e_tag") or "").strip('"')


def _never_sent(exc: BaseException) -> bool:
    text = str(exc)
    return "error sending request" in text and "Connect" in text


class S3BucketStore:
    def __init__(self, config: S3Config, *, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self._deadline_s = config.deadline_s
        options: dict[str, Any] = {"timeout": timedelta(seconds=config.deadline_s)}
        if config.endpoint and config.endpoint.startswith("http://"):
            options["allow_http"] = True
        settings: dict[str, Any] = {}
        if config.endpoint:
            settings["endpoint"] = config.endpoint
        if config.region:
            settings["region"] = config.region
        if config.access_key_id:
            settings["access_key_id"] = config.access_key_id
        if config.secret_access_key:
            settings["secret_access_key"] = config.secret_access_key
        prefix = config.prefix.strip("/")
        limit = timedelta(seconds=config.deadline_s)

        def make(retries: int) -> S3Store:
            return S3Store(
                config.bucket,
                prefix=prefix or None,
                config=settings,  # type: ignore[arg-type]
                client_options=options,  # type: ignore[arg-type]
                retry_config={"max_retries": retries, "retry_timeout": limit},
            )

        # Reads retry (idempotent); writes are sent once (see the module docstring).
        self._reads = make(2)
        self._writes = make(0)
        self._known: set[str] = set()  # buckets whose bucket.json was seen
        # (bucket, etag) -> path, from this process's listings: where a copy finds its source.
        self._by_hash: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=_READERS, thread_name_prefix="s3-read")

    # -- layout -----------------------------------------------------------------------
    @staticmethod
    def _base(bucket: str) -> str:
        ns, name = bucket_parts(bucket)
        return f"buckets/{ns}/{name}"

    def _key(self, bucket: str, path: str) -> str:
        return f"{self._base(bucket)}/files/{'/'.join(file_parts(path))}"

    # -- calls --------------------------------------------------------------------------
    def _call(self, what: str, fn: Callable[[], T], *, write: bool = False) -> T:
        left = deadlines.remaining()
        if left is not None and left <= 0:
            raise StorageUnavailable(
                f"{what}: the lease this request holds ran out; nothing was sent",
                hint=RETRY_HINT,
            )
        try:
            return fn()
        except StorageUnavailable:
            raise
        except (PermissionDeniedError, UnauthenticatedError) as exc:
            raise StorageUnavailable(
                f"{what}: the object store refused the credentials ({_first_line(exc)})"
                + ("; nothing was applied" if write else ""),
                hint="check BUCKETSYNC_S3_ACCESS_KEY_ID/SECRET_ACCESS_KEY or the AWS_* variables",
            ) from exc
        except (BaseError, OSError, RuntimeError, ValueError) as exc:  # obstore's, all
            text = f"{what}: the object store failed ({_first_line(exc)})"
            if write and not _never_sent(exc):
                raise WriteOutcomeUnknown(
                    f"{text}; the write may have been applied",
                    hint="retry with the same Idempotency-Key",
                ) from exc
            suffix = "; nothing was applied" if write else ""
            raise StorageUnavailable(text + suffix, hint=RETRY_HINT) from exc

    def _get(self, key: str) -> tuple[bytes, str] | None:
        try:
            result = obstore.get(self._reads, key)
        except FileNotFoundError:
            return None
        return bytes(result.bytes()), _etag(result.meta)

    # -- port ---------------------------------------------------------------------------
    def info(self, bucket: str) -> BucketInfo | None:
        found = self._call(
            f"read {bucket}/{_META}", lambda: self._get(f"{self._base(bucket)}/{_META}")
        )
        if found is None:
            return None
        try:
            meta = json.loads(found[0])
            created = datetime.fromisoformat(meta["created_at"])
        except (ValueError, KeyError, TypeError) as exc:
            raise StorageUnavailable(f"bucket metadata for {bucket} is unreadable: {exc}") from exc
        with self._lock:
            self._known.add(bucket)
        return BucketInfo(
            id=bucket,
            private=bool(meta.get("private", False)),
            created_at=created,
            creator=meta.get("creator"),
        )

    def create(self, bucket: str, *, creator: str, private: bool = False) -> BucketInfo:
        existing = self.info(bucket)
        if existing is not None:
            return existing
        meta = {
            "id": bucket,
            "creator": creator,
            "private": private,
            "created_at": self._clock.now().isoformat(),
        }
        key = f"{self._base(bucket)}/{_META}"

        def put() -> None:
            # If-None-Match: two processes creating it at once keep the first one's.
            with contextlib.suppress(AlreadyExistsError):
                obstore.put(self._writes, key, json.dumps(meta).encode(), mode="create")

        self._call(f"create {bucket}", put, write=True)
        info = self.info(bucket)
        if info is None:
            raise StorageUnavailable(f"bucket {bucket} was created but cannot be read back")
        return info

    def list(self, bucket: str, prefix: str = "", *, recursive: bool = True) -> list[FileEntry]:
        folder = prefix.strip("/")
        files = f"{self._base(bucket)}/files"
        start = f"{files}/{'/'.join(file_parts(folder))}" if folder else files
        cut = len(files) + 1

        def walk() -> list[Any]:
            if recursive:
                return [
                    meta
                    for chunk in obstore.list(self._reads, start, chunk_size=1000)
                    for meta in chunk
                ]
            return list(obstore.list_with_delimiter(self._reads, start)["objects"])

        metas = self._call(f"list {bucket}/{folder}", walk)
        if not metas and folder:  # the prefix may name a file, as on the local store
            try:
                one = self._call(
                    f"head {bucket}/{folder}", lambda: obstore.head(self._reads, start)
                )
            except StorageUnavailable as exc:
                if isinstance(exc.__cause__, FileNotFoundError):
                    return []
                raise
            metas = [one]
        entries = [
            FileEntry(path=str(m["path"])[cut:], size=int(m["size"]), content_hash=_etag(m))
            for m in metas
            if str(m["path"]).startswith(files + "/")
        ]
        with self._lock:
            for entry in entries:
                self._by_hash[(bucket, entry.content_hash)] = entry.path
        entries.sort(key=lambda e: e.path)
        return entries

    def read(self, bucket: str, path: str) -> bytes | None:
        key = self._key(bucket, path)
        found = self._call(f"read {bucket}/{path}", lambda: self._get(key))
        return None if found is None else found[0]

    def read_many(self, bucket: str, paths: Sequence[str]) -> dict[str, bytes]:
        if len(paths) <= 1:
            return {p: data for p in paths if (data := self.read(bucket, p)) is not None}
        results = self._pool.map(lambda p: (p, self.read(bucket, p)), paths)
        return {path: data for path, data in results if data is not None}

    def write_batch(self, bucket: str, batch: Batch) -> None:
        if not len(batch):
            return
        # Every path is checked before anything is sent: a bad one applies nothing.
        copies = [(src, digest, self._key(bucket, dest)) for src, digest, dest in batch.copies]
        adds = [(self._key(bucket, dest), data) for dest, data in batch.adds]
        deletes = [self._key(bucket, path) for path in batch.deletes]
        self._require(bucket)
        for src_bucket, content_hash, target in copies:
            source = self._source_of(src_bucket, content_hash)
            self._call(
                f"copy {src_bucket}@{content_hash} to {bucket}",
                partial(obstore.copy, self._writes, source, target),
                write=True,
            )
        for target, data in adds:
            self._call(
                f"write {bucket}/{target.split('/files/', 1)[1]}",
                partial(obstore.put, self._writes, target, data, use_multipart=False),
                write=True,
            )
        if deletes:
            self._call(
                f"delete {len(deletes)} files from {bucket}",
                partial(obstore.delete, self._writes, deletes),
                write=True,
            )

    # -- ConditionalStore ---------------------------------------------------------------
    def read_versioned(self, bucket: str, path: str) -> Versioned | None:
        key = self._key(bucket, path)
        found = self._call(f"read {bucket}/{path}", lambda: self._get(key))
        return None if found is None else Versioned(found[0], found[1])

    def write_if(self, bucket: str, path: str, data: bytes, *, version: str | None) -> str | None:
        self._require(bucket)
        key = self._key(bucket, path)

        def put() -> str | None:
            mode: Any = "create" if version is None else {"e_tag": f'"{version}"'}
            try:
                result = obstore.put(self._writes, key, data, mode=mode, use_multipart=False)
            except (AlreadyExistsError, PreconditionError):
                return None
            except FileNotFoundError:  # If-Match on a file deleted since it was read
                return None
            return _etag(result)

        return self._call(f"conditional write {bucket}/{path}", put, write=True)

    # -- internals ----------------------------------------------------------------------
    def _require(self, bucket: str) -> None:
        with self._lock:
            if bucket in self._known:
                return
        if self.info(bucket) is None:
            raise StorageUnavailable(f"bucket {bucket} does not exist")

    def _source_of(self, bucket: str, content_hash: str) -> str:
        """The key of a file of `bucket` whose ETag is `content_hash`."""
        with self._lock:
            path = self._by_hash.get((bucket, content_hash))
        if path is not None:
            key = self._key(bucket, path)
            try:
                meta = self._call(f"head {bucket}/{path}", lambda: obstore.head(self._reads, key))
                if _etag(meta) == content_hash:
                    return key
            except StorageUnavailable as exc:
                if not isinstance(exc.__cause__, FileNotFoundError):
                    raise
        for entry in self.list(bucket):
            if entry.content_hash == content_hash:
                return self._key(bucket, entry.path)
        raise StorageUnavailable(f"no file with hash {content_hash} in {bucket} to copy")
