"""Local scratch buckets (`/local/buckets/…`): the HF bucket rules, off HF.

Create: in your own namespace or an org you belong to (not as `read`). Write: only the
bucket's creator or an admin of its org. Read: any authenticated user; private buckets
only their creator and members of the owning org.
"""

from __future__ import annotations

import re
from typing import Any

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.access import bearer_caller
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.errors import Forbidden, InvalidPath, NotFound, PayloadTooLarge
from agenthub.bucketsync.identity.base import Caller
from agenthub.bucketsync.storage.base import Batch, BucketInfo

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
    if bucket in (hub.settings.central_bucket, hub.settings.audit_bucket):
        raise Forbidden(f"{bucket} belongs to bucket-sync", hint="create your scratch bucket")
    existing = hub.store.info(bucket)
    if existing is not None:
        if existing.creator != caller.user:
            raise Forbidden(f"bucket {bucket} already exists", hint="pick another name")
        # Re-creating your own bucket is not an error (like `--exist-ok`).
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


def _can_read(hub: Hub, caller: Caller, info: BucketInfo) -> bool:
    if not info.private or info.creator == caller.user:
        return True
    ns = info.id.split("/", 1)[0]
    return ns == caller.user or _role(hub, caller, ns) is not None


def put(hub: Hub, authorization: str | None, bucket: str, path: str, data: bytes) -> dict[str, Any]:
    caller = bearer_caller(hub, authorization)
    _validate_bucket_id(bucket)
    naming.validate_components(path, allow_dotfiles=True)
    info = _require_bucket(hub, bucket)
    if bucket in (hub.settings.central_bucket, hub.settings.audit_bucket):
        # The service's own buckets: an org admin could otherwise rewrite README.md, the
        # audit log or an inbox, which the API never lets anyone but the service write.
        raise Forbidden(
            f"{bucket} is written only by bucket-sync, whatever the caller's role",
            hint="post through /v1 (messages, results, sync), or write your scratch bucket",
        )
    ns = bucket.split("/", 1)[0]
    if info.creator != caller.user and _role(hub, caller, ns) != "admin":
        raise Forbidden(
            f"only {info.creator} (or an admin of {ns}) can write to {bucket}",
            hint="write to your own scratch bucket",
        )
    if len(data) > hub.settings.max_request_bytes:
        raise PayloadTooLarge(f"files are limited to {hub.settings.max_request_bytes} bytes")
    hub.store.write_batch(bucket, Batch(adds=[(path, data)]))
    return {"uri": f"hf://buckets/{bucket}/{path}", "size": len(data)}


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


def get(hub: Hub, authorization: str | None, bucket: str, path: str) -> bytes:
    caller = bearer_caller(hub, authorization)
    _validate_bucket_id(bucket)
    naming.validate_components(path, allow_dotfiles=True)
    info = _require_bucket(hub, bucket)
    if not _can_read(hub, caller, info):
        raise Forbidden(f"{bucket} is private")
    data = hub.store.read(bucket, path)
    if data is None:
        raise NotFound(f"hf://buckets/{bucket}/{path} does not exist")
    return data
