"""`HfBucketStore`: the BucketStore port on Hugging Face buckets (huggingface_hub 2.x).

Facts relied on (hf-api-facts.md): batches are non-transactional (a `BucketBatchError`
lists the failed paths after the rest were applied); tree prefixes match lexically, so
results are filtered to whole path components here; `BucketNotFoundError` only comes from
`/api/buckets/` 404s. Every call runs through `HubCalls` (a deadline, no sleeping inside
huggingface_hub, every vendor failure a retryable `StorageUnavailable`), never a 500 and
never a false "not found".
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from huggingface_hub import HfApi
from huggingface_hub.errors import BucketBatchError, BucketNotFoundError, EntryNotFoundError

from agenthub.bucketsync.errors import PartialWrite, StorageUnavailable
from agenthub.bucketsync.storage.base import Batch, BucketInfo, FileEntry
from agenthub.bucketsync.storage.governor import HubGovernor
from agenthub.bucketsync.storage.hubcalls import DEFAULT_DEADLINE_S, HubCalls, bound_xet_session

T = TypeVar("T")


class HfBucketStore:
    """Buckets on the Hub at `endpoint` (None: huggingface_hub's default, `HF_ENDPOINT`)."""

    def __init__(
        self,
        *,
        token: str | None,
        endpoint: str | None = None,
        deadline_s: float = DEFAULT_DEADLINE_S,
        api: Any = None,
        governor: HubGovernor | None = None,
    ) -> None:
        # token=None: huggingface_hub falls back to the cached login (local runs).
        self._token = token
        self._api = api if api is not None else HfApi(endpoint=endpoint, token=token)
        self._calls = HubCalls(deadline_s=deadline_s, governor=governor)
        bound_xet_session(deadline_s)

    def _call(self, what: str, fn: Callable[[], T], *, write: bool = False, xet: bool = False) -> T:
        # xet: the call moves content, and hf_xet asks the Hub for a Xet token itself.
        return self._calls.run(what, fn, write=write, unseen=1 if xet else 0)

    def info(self, bucket: str) -> BucketInfo | None:
        def get() -> BucketInfo | None:
            try:
                raw = self._api.bucket_info(bucket, token=self._token)
            except BucketNotFoundError:
                return None
            created = getattr(raw, "created_at", None) or datetime.now(UTC)
            # The Hub reports no per-user creator for org buckets (an `author` extra key, when
            # present, is the namespace), so the hf adapter leaves it unknown and bucket
            # control rests on the handshake alone, as in the seed.
            creator = None
            return BucketInfo(
                id=str(raw.id), private=bool(raw.private), created_at=created, creator=creator
            )

        return self._call(f"bucket_info({bucket})", get)

    def create(self, bucket: str, *, creator: str, private: bool = False) -> BucketInfo:
        self._call(
            f"create_bucket({bucket})",
            lambda: self._api.create_bucket(
                bucket, private=private, exist_ok=True, token=self._token
            ),
            write=True,
        )
        info = self.info(bucket)
        if info is None:
            raise StorageUnavailable(f"bucket {bucket} was created but cannot be read back")
        return info

    def list(self, bucket: str, prefix: str = "", *, recursive: bool = True) -> list[FileEntry]:
        folder = prefix.rstrip("/")

        def walk() -> list[FileEntry]:
            try:
                # Materialize inside the guard: pagination fetches lazily while iterating.
                items = list(
                    self._api.list_bucket_tree(
                        bucket, prefix=folder or None, recursive=recursive, token=self._token
                    )
                )
            except BucketNotFoundError as exc:
                raise StorageUnavailable(
                    f"bucket {bucket} does not exist", hint="check CENTRAL_BUCKET/AUDIT_BUCKET"
                ) from exc
            entries = []
            for item in items:
                if getattr(item, "type", None) != "file":
                    continue
                path = str(item.path)
                # The server matches prefixes lexically ("logs" also returns "logs.json").
                if folder and not (path == folder or path.startswith(folder + "/")):
                    continue
                entries.append(
                    FileEntry(path=path, size=int(item.size), content_hash=str(item.xet_hash))
                )
            entries.sort(key=lambda e: e.path)
            return entries

        return self._call(f"list_bucket_tree({bucket}, {folder!r})", walk)

    def read(self, bucket: str, path: str) -> bytes | None:
        def fetch() -> bytes | None:
            with tempfile.TemporaryDirectory(prefix="bucketsync-") as tmp:
                target = Path(tmp) / "file"
                try:
                    self._api.download_bucket_files(
                        bucket,
                        [(path, str(target))],
                        raise_on_missing_files=True,
                        token=self._token,
                    )
                except (BucketNotFoundError, EntryNotFoundError):
                    return None
                return target.read_bytes() if target.exists() else None

        return self._call(f"download {bucket}/{path}", fetch, xet=True)

    def read_many(self, bucket: str, paths: Sequence[str]) -> dict[str, bytes]:
        if not paths:
            return {}

        def fetch() -> dict[str, bytes]:
            try:
                # Asking paths-info here (what download_bucket_files would ask) leaves the
                # absent paths out without its per-file "not found" warnings.
                found = list(self._api.get_bucket_paths_info(bucket, paths, token=self._token))
            except BucketNotFoundError:
                return {}
            with tempfile.TemporaryDirectory(prefix="bucketsync-") as tmp:
                targets = {
                    info.path: Path(tmp) / hashlib.sha256(info.path.encode()).hexdigest()
                    for info in found
                }
                self._api.download_bucket_files(
                    bucket,
                    [(info, str(targets[info.path])) for info in found],
                    token=self._token,
                )
                return {path: target.read_bytes() for path, target in targets.items()}

        return self._call(f"download {len(paths)} files from {bucket}", fetch, xet=True)

    def write_batch(self, bucket: str, batch: Batch) -> None:
        if not len(batch):
            return
        what = f"batch write to {bucket}"

        def send() -> None:
            try:
                self._api.batch_bucket_files(
                    bucket,
                    add=[(data, path) for path, data in batch.adds] or None,
                    copy=[("bucket", src, digest, dest) for src, digest, dest in batch.copies]
                    or None,
                    delete=list(batch.deletes) or None,
                    token=self._token,
                )
            except BucketBatchError as exc:
                failures = exc.failures
                failed = ", ".join(str(f.get("path")) for f in failures[:5])
                raise PartialWrite(
                    f"{what}: the hub applied the batch only in part (failed: {failed})",
                    failed=[str(f.get("path")) for f in failures],
                    hint="retry; writes are idempotent by path",
                ) from exc

        self._call(what, send, write=True, xet=bool(batch.adds))
