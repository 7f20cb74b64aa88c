"""Local buckets (`/local/buckets/…`): the Hub's bucket permissions, off HF.

Create: in your own namespace or an org you belong to (not as `read`); the service's own
buckets (central, audit) only by an admin of their org. Write: the bucket's creator or an
admin of its org — so an organizer edits the central and audit buckets out of band, as on
the Hub (seed §9 human verdicts, §4 the harness and the private eval set), and nobody
writes outside their namespaces. The service's buckets are never writable as their
"creator": only org admins write them here. Read: any authenticated user; private buckets
only their creator and members of the owning org. What a promotion may not target
(README.md, `audit/`, …, seed §5) is the promotion path's rule (`naming.check_not_blocked`),
not this API's.

A file upload (`PUT …/files/{path}`) is received in pieces into the store's temp file and
placed atomically when complete: any size up to `MAX_UPLOAD_BYTES` (default 5 GiB, the
seed's per-call sync size), in memory one piece at a time. `MAX_REQUEST_BYTES` bounds the
JSON bodies of the rest of the API, not files.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.access import bearer_caller
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.errors import Forbidden, InvalidPath, NotFound, PayloadTooLarge
from agenthub.bucketsync.identity.base import Caller
from agenthub.bucketsync.settings import BucketSyncSettings
from agenthub.bucketsync.storage.base import BucketInfo, StreamingStore, Upload

_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def _validate_bucket_id(bucket: str) -> str:
    ns, _, name = bucket.partition("/")
    if not (_NAME_OK.match(ns) and _NAME_OK.match(name)) or ".." in bucket:
        raise InvalidPath(
            f"bucket id {bucket!r} must look like 'namespace/name'",
            hint="e.g. my-org/challenge-agent-1",
        )
    return bucket


def _role(hub: Hub, caller: Caller, org: str) -> str | None:
    if org in caller.orgs and caller.orgs[org] is not None:
        return caller.orgs[org]
    return hub.identity.org_role(org, caller.user, caller.email)


def _require_bucket(hub: Hub, bucket: str) -> BucketInfo:
    info = hub.store.info(bucket)
    if info is None:
        raise NotFound(f"bucket {bucket} does not exist", hint=f"agenthub buckets create {bucket}")
    return info


def create(hub: Hub, authorization: str | None, bucket: str, *, private: bool) -> dict[str, Any]:
    caller = bearer_caller(hub, authorization)
    _validate_bucket_id(bucket)
    ns = bucket.split("/", 1)[0]
    if ns != caller.user and _role(hub, caller, ns) in (None, "read"):
        raise Forbidden(
            f"{caller.user} cannot create buckets in {ns}",
            hint=f"create it under {caller.user}/ or an org you can write to",
        )
    if _is_service_bucket(hub, bucket) and not _is_admin(hub, caller, ns):
        # Whoever creates it would write the collaboration record; on the Hub the org's
        # admins create it (seed §1), and the server refuses to start on any other creator.
        raise Forbidden(
            f"{bucket} is the challenge's own bucket: only an admin of {ns} may create it",
            hint="create your scratch bucket instead",
        )
    existing = hub.store.info(bucket)
    if existing is not None:
        if not _can_write(hub, caller, existing):
            raise Forbidden(f"bucket {bucket} already exists", hint="pick another name")
        # Re-creating a bucket you can write is not an error (like `--exist-ok`).
        return _info_json(existing) | {"created": False}
    info = hub.store.create(bucket, creator=caller.user, private=private)
    return _info_json(info) | {"created": True}


def _info_json(info: BucketInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "private": info.private,
        "creator": info.creator,
        "created_at": info.created_at.isoformat(),
        "uri": f"hf://buckets/{info.id}",
    }


def _is_service_bucket(hub: Hub, bucket: str) -> bool:
    return bucket in (hub.settings.central_bucket, hub.settings.audit_bucket)


def _is_admin(hub: Hub, caller: Caller, org: str) -> bool:
    return _role(hub, caller, org) == "admin"


def _can_write(hub: Hub, caller: Caller, info: BucketInfo) -> bool:
    """The Hub's rule: the creator or an admin of the bucket's org. The service's buckets
    count no creator (the service writes them through its store, never through here)."""
    ns = info.id.split("/", 1)[0]
    if info.creator == caller.user and not _is_service_bucket(hub, info.id):
        return True
    return _is_admin(hub, caller, ns)


def _can_read(hub: Hub, caller: Caller, info: BucketInfo) -> bool:
    if not info.private or info.creator == caller.user:
        return True
    ns = info.id.split("/", 1)[0]
    return ns == caller.user or _role(hub, caller, ns) is not None


def upload_too_large(settings: BucketSyncSettings, size: int | None = None) -> PayloadTooLarge:
    """The refusal of a file over `MAX_UPLOAD_BYTES`, naming the setting and its value."""
    limit = settings.max_upload_bytes
    said = f"is {size} bytes" if size is not None else "is larger than that"
    return PayloadTooLarge(
        f"files are limited to {limit} bytes (MAX_UPLOAD_BYTES); this one {said}",
        hint="split the file, or raise MAX_UPLOAD_BYTES on the server "
        f"(now {limit}; the seed's sync limit is SYNC_MAX_BYTES={settings.sync_max_bytes})",
    )


class Receiving:
    """A file upload the caller may write, being received: `write` its pieces, then
    `finish` (placed atomically) or `abort` (nothing changes)."""

    def __init__(self, upload: Upload, settings: BucketSyncSettings, uri: str) -> None:
        self._upload, self._settings, self._uri = upload, settings, uri

    def write(self, chunk: bytes) -> None:
        if self._upload.size + len(chunk) > self._settings.max_upload_bytes:
            self._upload.abort()
            raise upload_too_large(self._settings)
        self._upload.write(chunk)

    def finish(self) -> dict[str, Any]:
        entry = self._upload.commit()
        return {"uri": self._uri, "size": entry.size, "content_hash": entry.content_hash}

    def abort(self) -> None:
        self._upload.abort()


def _streaming(hub: Hub) -> StreamingStore:
    store = hub.store
    if not isinstance(store, StreamingStore):
        raise NotFound(
            "this server's store has no /local/buckets file API",
            hint="in hf mode write your bucket with `hf buckets cp`",
        )
    return store


def start_put(
    hub: Hub, authorization: str | None, bucket: str, path: str, *, declared: int | None
) -> Receiving:
    """Check the caller may write `path` (and a declared size fits) before a byte is read."""
    caller = bearer_caller(hub, authorization)
    _validate_bucket_id(bucket)
    naming.validate_components(path, allow_dotfiles=True)
    info = _require_bucket(hub, bucket)
    if not _can_write(hub, caller, info):
        ns = bucket.split("/", 1)[0]
        if _is_service_bucket(hub, bucket):
            raise Forbidden(
                f"only admins of {ns} write {bucket} directly; {caller.user} is not one",
                hint="write your scratch bucket and promote from it (POST /v1/messages, "
                "/v1/results, /v1/artifacts:sync)",
            )
        raise Forbidden(
            f"only {info.creator} (or an admin of {ns}) can write to {bucket}",
            hint="write to your own scratch bucket",
        )
    if declared is not None and declared > hub.settings.max_upload_bytes:
        raise upload_too_large(hub.settings, declared)
    upload = _streaming(hub).upload(bucket, path)
    return Receiving(upload, hub.settings, f"hf://buckets/{bucket}/{path}")


def tree(
    hub: Hub, authorization: str | None, bucket: str, prefix: str, *, recursive: bool
) -> dict[str, Any]:
    caller = bearer_caller(hub, authorization)
    _validate_bucket_id(bucket)
    if prefix:
        naming.validate_components(prefix.rstrip("/"), allow_dotfiles=True)
    info = _require_bucket(hub, bucket)
    if not _can_read(hub, caller, info):
        raise Forbidden(f"{bucket} is private")
    entries = hub.store.list(bucket, prefix, recursive=recursive)
    return {
        "bucket": bucket,
        "items": [
            {"path": e.path, "size": e.size, "content_hash": e.content_hash} for e in entries
        ],
    }


def get(hub: Hub, authorization: str | None, bucket: str, path: str) -> Iterator[bytes]:
    """A file's bytes in pieces (a download of gigabytes holds one piece at a time)."""
    caller = bearer_caller(hub, authorization)
    _validate_bucket_id(bucket)
    naming.validate_components(path, allow_dotfiles=True)
    info = _require_bucket(hub, bucket)
    if not _can_read(hub, caller, info):
        raise Forbidden(f"{bucket} is private")
    pieces = _streaming(hub).stream(bucket, path)
    if pieces is None:
        raise NotFound(f"hf://buckets/{bucket}/{path} does not exist")
    return pieces
