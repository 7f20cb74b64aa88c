"""A recording fake of the `huggingface_hub` functions the `hf` adapters call.

It behaves as hf-api-facts.md describes: `BucketNotFoundError` only for missing buckets,
lexical tree-prefix matching, paginated listings fetched lazily while iterating,
non-transactional batches that apply what they can and then raise `BucketBatchError`, xet
hashes that are not the sha256 of the content, and `whoami` / org members with roles.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2  # huggingface_hub 2.x raises its errors with httpx2 responses
from huggingface_hub._buckets import BucketFile, BucketFolder, BucketInfo
from huggingface_hub.errors import (
    BucketBatchError,
    BucketNotFoundError,
    EntryNotFoundError,
    HfHubHTTPError,
)
from huggingface_hub.hf_api import User


def _response(status: int, url: str, headers: dict[str, str] | None = None) -> httpx2.Response:
    return httpx2.Response(status, headers=headers or {}, request=httpx2.Request("GET", url))


def xet_hash(data: bytes) -> str:
    return hashlib.sha256(b"xet-chunked:" + data).hexdigest()


class FakeHub:
    def __init__(self, *, page_size: int = 3) -> None:
        self.buckets: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, Any]] = []
        self.page_size = page_size
        self.fail_paths: set[str] = set()
        self.fail_listing_after_pages: int | None = None
        self.down = False
        self.tokens: dict[str, dict[str, Any]] = {}
        self.members: dict[str, list[dict[str, Any]]] = {}

    # -- setup helpers --------------------------------------------------------------------
    def add_bucket(self, bucket_id: str, *, author: str, private: bool = False) -> None:
        self.buckets[bucket_id] = {"author": author, "private": private, "files": {}}

    def put(self, bucket_id: str, path: str, data: bytes) -> None:
        self.buckets[bucket_id]["files"][path] = data

    def files(self, bucket_id: str) -> dict[str, bytes]:
        return dict(self.buckets[bucket_id]["files"])

    def _bucket(self, bucket_id: str) -> dict[str, Any]:
        if self.down:
            raise HfHubHTTPError(
                "503 Service Unavailable", response=_response(503, f"/api/buckets/{bucket_id}")
            )
        if bucket_id not in self.buckets:
            raise BucketNotFoundError(
                f"404 bucket {bucket_id}",
                response=_response(
                    404, f"/api/buckets/{bucket_id}", {"X-Error-Code": "RepoNotFound"}
                ),
            )
        return self.buckets[bucket_id]

    # -- huggingface_hub surface -------------------------------------------------------------
    def bucket_info(self, bucket_id: str, *, token: Any = None) -> BucketInfo:
        self.calls.append(("bucket_info", bucket_id))
        bucket = self._bucket(bucket_id)
        # huggingface_hub's models take untyped **kwargs (the Hub's JSON keys).
        return BucketInfo(  # type: ignore[no-untyped-call]
            id=bucket_id,
            private=bucket["private"],
            createdAt="2026-01-01T00:00:00.000Z",
            size=sum(len(v) for v in bucket["files"].values()),
            totalFiles=len(bucket["files"]),
            author=bucket["author"],
        )

    def create_bucket(
        self,
        bucket_id: str,
        *,
        private: bool | None = None,
        exist_ok: bool = False,
        token: Any = None,
    ) -> None:
        self.calls.append(("create_bucket", bucket_id))
        if bucket_id in self.buckets and not exist_ok:
            raise HfHubHTTPError("409", response=_response(409, f"/api/buckets/{bucket_id}"))
        self.buckets.setdefault(
            bucket_id, {"author": "admin", "private": bool(private), "files": {}}
        )

    def list_bucket_tree(
        self,
        bucket_id: str,
        prefix: str | None = None,
        *,
        recursive: bool | None = None,
        token: Any = None,
    ) -> Iterator[Any]:
        self.calls.append(("list_bucket_tree", (bucket_id, prefix, recursive)))

        def pages() -> Iterator[Any]:
            # Like `paginate`: nothing is requested until the caller iterates.
            bucket = self._bucket(bucket_id)
            matched = sorted(p for p in bucket["files"] if p.startswith(prefix or ""))
            items: list[Any] = []
            folders: set[str] = set()
            for path in matched:
                rest = path[len(prefix or "") :].lstrip("/")
                if not recursive and "/" in rest:
                    folder = path[: len(path) - len(rest)] + rest.split("/", 1)[0]
                    if folder not in folders:
                        folders.add(folder)
                        items.append(BucketFolder(type="directory", path=folder))  # type: ignore[no-untyped-call]
                    continue
                data = bucket["files"][path]
                items.append(
                    BucketFile(  # type: ignore[no-untyped-call]
                        type="file", path=path, size=len(data), xetHash=xet_hash(data)
                    )
                )
            for page_number, start in enumerate(range(0, len(items), self.page_size)):
                if (
                    self.fail_listing_after_pages is not None
                    and page_number >= self.fail_listing_after_pages
                ):
                    raise HfHubHTTPError(
                        "502 Bad Gateway", response=_response(502, "/api/buckets/tree")
                    )
                self.calls.append(("tree_page", page_number))
                yield from items[start : start + self.page_size]

        return pages()

    def download_bucket_files(
        self,
        bucket_id: str,
        files: list[tuple[str, str]],
        *,
        raise_on_missing_files: bool = False,
        token: Any = None,
    ) -> None:
        self.calls.append(("download_bucket_files", [path for path, _ in files]))
        bucket = self._bucket(bucket_id)
        for path, target in files:
            if path not in bucket["files"]:
                if raise_on_missing_files:
                    raise EntryNotFoundError(f"{path} not found in {bucket_id}")
                continue
            Path(target).write_bytes(bucket["files"][path])

    def batch_bucket_files(
        self,
        bucket_id: str,
        *,
        add: list[tuple[bytes, str]] | None = None,
        copy: list[tuple[str, str, str, str]] | None = None,
        delete: list[str] | None = None,
        token: Any = None,
    ) -> None:
        self.calls.append(
            (
                "batch_bucket_files",
                {
                    "bucket": bucket_id,
                    "add": [path for _, path in add or []],
                    "copy": list(copy or []),
                    "delete": list(delete or []),
                },
            )
        )
        bucket = self._bucket(bucket_id)
        failures = []
        for _type, source_id, content_hash, dest in copy or []:
            source = self.buckets.get(source_id, {"files": {}})["files"]
            match = [d for d in source.values() if xet_hash(d) == content_hash]
            if dest in self.fail_paths or not match:
                failures.append({"path": dest, "error": "copy failed"})
            else:
                bucket["files"][dest] = match[0]
        for data, dest in add or []:
            if dest in self.fail_paths:
                failures.append({"path": dest, "error": "injected failure"})
            else:
                bucket["files"][dest] = bytes(data)
        for path in delete or []:
            bucket["files"].pop(path, None)
        if failures:
            error = BucketBatchError(
                "batch partly failed", response=_response(200, f"/api/buckets/{bucket_id}/batch")
            )
            error.failures = failures
            raise error

    def whoami(self, token: Any = None, *, cache: bool = False) -> dict[str, Any]:
        self.calls.append(("whoami", None))
        if self.down:
            raise HfHubHTTPError("500", response=_response(500, "/api/whoami-v2"))
        if token not in self.tokens:
            raise HfHubHTTPError("Invalid user token", response=_response(401, "/api/whoami-v2"))
        return self.tokens[token]

    def list_organization_members(self, organization: str, token: Any = None) -> Iterator[User]:
        self.calls.append(("list_organization_members", organization))
        if self.down:
            raise HfHubHTTPError("500", response=_response(500, "/api/organizations"))
        return iter([User(**member) for member in self.members.get(organization, [])])
