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


def put(hub: Hub, authorization: str | None, bucket: str, path: str, data: bytes) -> dict[str, Any]:
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
