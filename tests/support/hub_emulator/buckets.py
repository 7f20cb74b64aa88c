"""Buckets on the emulator: info/create, tree (paginated), paths-info, NDJSON batch, Xet
tokens, resolve, the change feed (server-sent events) and the CAS blob store.

Content lives in a CAS keyed by an emulated Xet hash (64 hex, not the sha256 of the
bytes, like the real one); a file is a path pointing at a hash, so copies by hash cost
no bytes, as on the Hub.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlencode

from tests.support.hub_emulator.wire import HubError, HubRequest, HubResponse, RouteTable

BUCKET = r"/api/buckets/(?P<bucket>[^/]+/[^/]+)"


def xet_hash(data: bytes) -> str:
    """The emulator's content hash: 64 hex digits like a Xet hash, not a sha256 of `data`."""
    return hashlib.sha256(b"xet-emulated:" + data).hexdigest()


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


@dataclass
class StoredFile:
    xet_hash: str
    size: int
    mtime_ms: int
    uploaded_at: float

    def wire(self, path: str) -> dict[str, Any]:
        return {
            "type": "file",
            "path": path,
            "size": self.size,
            "xetHash": self.xet_hash,
            "mtime": _iso(self.mtime_ms / 1000),
            "uploadedAt": _iso(self.uploaded_at),
        }


@dataclass
class Bucket:
    id: str
    private: bool
    author: str
    created_at: float
    files: dict[str, StoredFile] = field(default_factory=dict)
    updated_at: float = 0.0
    # The change feed: (cursor number, time, changes); cursors are "1", "2", ...
    events: list[tuple[int, float, list[dict[str, Any]]]] = field(default_factory=list)


class BucketState:
    """Every bucket and blob; `changed` wakes the event streams."""

    def __init__(self, *, page_size: int = 50, feed_buffer: int = 1000) -> None:
        self.buckets: dict[str, Bucket] = {}
        self.blobs: dict[str, bytes] = {}
        self.page_size = page_size
        self.feed_buffer = feed_buffer
        self.fail_paths: set[str] = set()  # batch operations on these paths fail (partial batch)
        self.feed_enabled = True
        self.cas_tokens: set[str] = set()
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self._seq = 0

    # -- direct access for tests (no HTTP, not counted) ---------------------------------------
    def add_bucket(self, bucket_id: str, *, author: str = "", private: bool = False) -> Bucket:
        with self.lock:
            now = time.time()
            bucket = Bucket(bucket_id, private, author or bucket_id.split("/")[0], now)
            bucket.updated_at = now
            self.buckets[bucket_id] = bucket
            return bucket

    def put(self, bucket_id: str, path: str, data: bytes) -> str:
        """Store `data` at `path` as an out-of-band edit would (it shows on the feed)."""
        with self.lock:
            digest = self.store_blob(data)
            self._apply(self.bucket(bucket_id), [("add", path, digest, int(time.time() * 1000))])
            return digest

    def delete(self, bucket_id: str, path: str) -> None:
        """Remove `path` as an out-of-band edit would (it shows on the feed)."""
        with self.lock:
            self._apply(self.bucket(bucket_id), [("delete", path, "", 0)])

    def files(self, bucket_id: str) -> dict[str, bytes]:
        with self.lock:
            bucket = self.bucket(bucket_id)
            return {path: self.blobs[f.xet_hash] for path, f in bucket.files.items()}

    def store_blob(self, data: bytes) -> str:
        digest = xet_hash(data)
        with self.lock:
            self.blobs[digest] = bytes(data)
        return digest

    def bucket(self, bucket_id: str) -> Bucket:
        found = self.buckets.get(bucket_id)
        if found is None:
            raise HubError(404, f"Bucket {bucket_id} not found", code="RepoNotFound")
        return found

    # -- writes --------------------------------------------------------------------------------
    def _apply(self, bucket: Bucket, ops: list[tuple[str, str, str, int]]) -> None:
        """Apply (op, path, hash, mtime_ms) changes and publish them as one feed batch."""
        now = time.time()
        changes: list[dict[str, Any]] = []
        for op, path, digest, mtime_ms in ops:
            if op == "delete":
                if bucket.files.pop(path, None) is not None:
                    changes.append({"path": path, "op": "delete"})
                continue
            existed = path in bucket.files
            bucket.files[path] = StoredFile(digest, len(self.blobs[digest]), mtime_ms, now)
            change = bucket.files[path].wire(path)
            del change["type"]
            changes.append({**change, "op": "update" if existed else "add"})
        if changes:
            bucket.updated_at = now
            self._seq += 1
            bucket.events.append((self._seq, now, changes))
            del bucket.events[: -self.feed_buffer]
            self.changed.notify_all()

    def batch(self, bucket_id: str, lines: list[dict[str, Any]]) -> list[dict[str, str]]:
        with self.lock:
            bucket = self.bucket(bucket_id)
            failed: list[dict[str, str]] = []
            ops: list[tuple[str, str, str, int]] = []
            for line in lines:
                path = str(line.get("path", ""))
                kind = line.get("type")
                if path in self.fail_paths:
                    failed.append({"path": path, "error": "injected failure"})
                elif kind == "deleteFile":
                    ops.append(("delete", path, "", 0))
                elif kind in ("addFile", "copyFile"):
                    error = self._check_source(line)
                    if error:
                        failed.append({"path": path, "error": error})
                    else:
                        ops.append(("add", path, str(line["xetHash"]), int(line.get("mtime") or 0)))
                else:
                    failed.append({"path": path, "error": f"unknown operation {kind!r}"})
            self._apply(bucket, ops)
            return failed

    def _check_source(self, line: dict[str, Any]) -> str | None:
        digest = str(line.get("xetHash", ""))
        if digest not in self.blobs:
            return f"xet hash {digest[:12]}… was never uploaded"
        if line.get("type") == "copyFile":
            source = self.buckets.get(str(line.get("sourceRepoId")))
            if source is None or not any(f.xet_hash == digest for f in source.files.values()):
                return "source file not found"
        return None


def install(
    table: RouteTable, state: BucketState, *, cas_url: Callable[[], str], stopping: threading.Event
) -> None:
    """Register the bucket routes on `table`; `cas_url()` is the Xet storage host's URL and
    `stopping` ends the event streams."""

    @table.add("bucket_create", "POST", r"/api/buckets/(?P<ns>[^/]+)/(?P<name>[^/]+)")
    def create(request: HubRequest) -> HubResponse:
        bucket_id = f"{request.params['ns']}/{request.params['name']}"
        with state.lock:
            url = f"{request.base_url}/buckets/{bucket_id}"
            if bucket_id in state.buckets:
                # The client reads `url` from the 409 too (`create_bucket(exist_ok=True)`).
                message = f"Bucket {bucket_id} already exists"
                return HubResponse.json(
                    {"error": message, "url": url}, 409, {"X-Error-Message": message}
                )
            body = request.json() or {}
            state.add_bucket(bucket_id, private=body.get("visibility") == "private")
        return HubResponse.json({"url": url})

    @table.add("bucket_info", "GET", BUCKET)
    def info(request: HubRequest) -> HubResponse:
        with state.lock:
            bucket = state.bucket(request.params["bucket"])
            return HubResponse.json(
                {
                    "id": bucket.id,
                    "author": bucket.author,
                    "private": bucket.private,
                    "createdAt": _iso(bucket.created_at),
                    "updatedAt": _iso(bucket.updated_at),
                    "size": sum(f.size for f in bucket.files.values()),
                    "totalFiles": len(bucket.files),
                }
            )

    @table.add("tree", "GET", BUCKET + r"/tree(?:/(?P<prefix>.+))?")
    def tree(request: HubRequest) -> HubResponse:
        prefix = unquote(request.params.get("prefix") or "")
        recursive = (request.arg("recursive") or "false").lower() == "true"
        with state.lock:
            bucket = state.bucket(request.params["bucket"])
            items: list[dict[str, Any]] = []
            folders: set[str] = set()
            for path in sorted(p for p in bucket.files if p.startswith(prefix)):
                rest = path[len(prefix) :].lstrip("/")
                if not recursive and "/" in rest:
                    folder = path[: len(path) - len(rest)] + rest.split("/", 1)[0]
                    if folder not in folders:
                        folders.add(folder)
                        items.append({"type": "directory", "path": folder})
                    continue
                items.append(bucket.files[path].wire(path))
        start = int(request.arg("cursor") or 0)
        page = items[start : start + state.page_size]
        headers = {}
        if start + state.page_size < len(items):
            query = urlencode({"recursive": str(recursive).lower(), "cursor": start + len(page)})
            headers["Link"] = f'<{request.base_url}{request.path}?{query}>; rel="next"'
        return HubResponse.json(page, headers=headers)

    @table.add("paths_info", "POST", BUCKET + r"/paths-info")
    def paths_info(request: HubRequest) -> HubResponse:
        wanted = (request.json() or {}).get("paths", [])
        with state.lock:
            bucket = state.bucket(request.params["bucket"])
            found = [bucket.files[p].wire(p) for p in wanted if p in bucket.files]
        return HubResponse.json(found)

    @table.add("batch", "POST", BUCKET + r"/batch")
    def batch(request: HubRequest) -> HubResponse:
        lines = [json.loads(line) for line in request.body.splitlines() if line.strip()]
        failed = state.batch(request.params["bucket"], lines)
        status = 422 if failed and len(failed) == len(lines) else 200
        return HubResponse.json({"failed": failed}, status)

    @table.add("xet_token", "GET", BUCKET + r"/xet-(?P<mode>read|write)-token")
    def xet_token(request: HubRequest) -> HubResponse:
        with state.lock:
            state.bucket(request.params["bucket"])
            token = f"xet-{request.params['mode']}-{len(state.cas_tokens)}"
            state.cas_tokens.add(token)
        exp = int(time.time()) + 3600
        cas = cas_url()
        return HubResponse.json(
            {"accessToken": token, "exp": exp, "casUrl": cas},
            headers={
                "X-Xet-Cas-Url": cas,
                "X-Xet-Access-Token": token,
                "X-Xet-Token-Expiration": str(exp),
            },
        )

    @table.add(
        "resolve", "GET", r"/buckets/(?P<bucket>[^/]+/[^/]+)/resolve/(?P<path>.+)", kind="resolve"
    )
    def resolve(request: HubRequest) -> HubResponse:
        path = unquote(request.params["path"])
        bucket_id = request.params["bucket"]
        with state.lock:
            stored = state.bucket(bucket_id).files.get(path)
            if stored is None:
                raise HubError(404, f"{path} not found in {bucket_id}", code="EntryNotFound")
            data = state.blobs[stored.xet_hash]
        refresh = f"{request.base_url}/api/buckets/{bucket_id}/xet-read-token"
        headers = {
            "X-Xet-Hash": stored.xet_hash,
            "X-Xet-Refresh-Route": refresh,
            "X-Linked-Size": str(stored.size),
            "ETag": f'"{stored.xet_hash}"',
        }
        span = request.headers.get("range", "")
        if span.startswith("bytes="):
            first, _, last = span[6:].partition("-")
            end = int(last) + 1 if last else len(data)
            part = data[int(first or 0) : end]
            headers["Content-Range"] = f"bytes {int(first or 0)}-{end - 1}/{len(data)}"
            return HubResponse(206, part, headers)
        return HubResponse(200, data, headers)

    @table.add("bucket_events", "GET", BUCKET + r"/events")
    def events(request: HubRequest) -> HubResponse:
        if not state.feed_enabled:
            raise HubError(404, "live follow is not enabled here")
        with state.lock:
            bucket = state.bucket(request.params["bucket"])
        return HubResponse(
            200,
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"},
            stream=_feed(state, bucket, request, stopping),
        )

    @table.add("cas_put", "PUT", r"/xet/(?P<hash>[0-9a-f]{64})", kind="cas")
    def cas_put(request: HubRequest) -> HubResponse:
        _check_cas_token(state, request)
        if xet_hash(request.body) != request.params["hash"]:
            raise HubError(400, "the content does not match its hash")
        state.store_blob(request.body)
        return HubResponse.json({"stored": True})

    @table.add("cas_get", "GET", r"/xet/(?P<hash>[0-9a-f]{64})", kind="cas")
    def cas_get(request: HubRequest) -> HubResponse:
        _check_cas_token(state, request)
        with state.lock:
            data = state.blobs.get(request.params["hash"])
        if data is None:
            raise HubError(404, "no such xorb")
        return HubResponse(200, data, {"Content-Type": "application/octet-stream"})


def _check_cas_token(state: BucketState, request: HubRequest) -> None:
    if request.token not in state.cas_tokens:
        raise HubError(401, "a Xet access token from xet-read-token/xet-write-token is required")


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _feed(
    state: BucketState, bucket: Bucket, request: HubRequest, stopping: threading.Event
) -> Iterator[bytes]:
    """Replay the batches after `cursor` (or since `since`), `ready`, then follow live until
    the emulator stops; a cursor older than the buffer gets `reset`."""
    cursor_arg = request.arg("cursor")
    since_arg = request.arg("since")
    with state.lock:
        oldest = bucket.events[0][0] if bucket.events else state._seq + 1
        if cursor_arg is not None:
            after = int(cursor_arg)
            if after + 1 < oldest and bucket.events:
                yield _sse("reset", {"reason": "cursor older than the replay buffer"})
                return
        elif since_arg:
            when = datetime.fromisoformat(since_arg.replace("Z", "+00:00")).timestamp()
            # `updatedAt` went through a microsecond ISO string: compare at that precision.
            after = max((seq for seq, at, _ in bucket.events if at <= when + 1e-6), default=0)
        else:
            after = state._seq
    ready_sent = False
    while not stopping.is_set():
        with state.lock:
            pending = [(seq, changes) for seq, _, changes in bucket.events if seq > after]
            if not pending and ready_sent:
                state.changed.wait(timeout=0.5)
                pending = [(seq, changes) for seq, _, changes in bucket.events if seq > after]
        for seq, changes in pending:
            after = seq
            yield _sse("changes", {"cursor": str(seq), "changes": changes})
        if not ready_sent:
            ready_sent = True
            yield _sse("ready", {"cursor": str(after)})
        elif not pending:
            yield b": keep-alive\n\n"
