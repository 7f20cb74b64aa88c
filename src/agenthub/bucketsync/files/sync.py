"""Mirroring files from a scratch bucket into the central bucket by hash copy (bytes never
transit the Space): `artifacts/{slug}_{agent_id}/…` and `shared_resources/{dest_path}`."""

from __future__ import annotations

from typing import Any

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.clihints import bucket_cli
from agenthub.bucketsync.core.hub import CallerInfo, Hub
from agenthub.bucketsync.core.sources import claim_source
from agenthub.bucketsync.errors import InvalidPath, SourceNotFound, SyncTooLarge
from agenthub.bucketsync.storage.base import Batch, FileEntry

SHARED = "shared_resources/"
ARTIFACTS = "artifacts/"


def _source_files(hub: Hub, uri: str) -> tuple[naming.SourceRef, list[tuple[FileEntry, str]]]:
    """The files at `uri` (a file, or a folder mirrored recursively) with relative names."""
    source = claim_source(hub, uri)
    folder = source.path.rstrip("/")
    found: list[tuple[FileEntry, str]] = []
    for entry in hub.store.list(source.bucket, folder, recursive=True):
        relative = (
            entry.path.rsplit("/", 1)[-1]
            if entry.path == folder
            else (entry.path[len(folder) + 1 :])
        )
        try:
            naming.validate_components(relative)
        except InvalidPath:
            continue  # dot files and odd names stay in the scratch bucket
        found.append((entry, relative))
    if not found:
        raise SourceNotFound(
            f"{uri} has no files", hint=f"{bucket_cli(hub.settings.storage)} sync <local dir> {uri}"
        )
    count = len(found)
    size = sum(entry.size for entry, _ in found)
    if count > hub.settings.sync_max_files or size > hub.settings.sync_max_bytes:
        raise SyncTooLarge(
            f"{uri} is {count} files / {size} bytes; one sync copies at most "
            f"{hub.settings.sync_max_files} files / {hub.settings.sync_max_bytes} bytes",
            hint="split it into several syncs of sub-folders",
        )
    return source, found


def _copy(
    hub: Hub,
    route: str,
    uri: str,
    source: naming.SourceRef,
    plan: list[tuple[FileEntry, str]],
    dest: str,
    caller_info: CallerInfo,
) -> dict[str, Any]:
    for _entry, target in plan:
        naming.check_not_blocked(target)
    hub.store.write_batch(
        hub.central,
        Batch(copies=[(source.bucket, entry.content_hash, target) for entry, target in plan]),
    )
    total = sum(entry.size for entry, _ in plan)
    hub.audit.record(
        agent_id=source.agent_id,
        route=route,
        via="bucket",
        source=uri,
        target_path=dest,
        size=total,
        status_code=200,
        file_count=len(plan),
        caller_ip=caller_info.ip,
        user_agent=caller_info.user_agent,
    )
    return {
        "dest": dest,
        "files": [
            {"src_path": entry.path, "dest_path": target, "bytes": entry.size}
            for entry, target in plan
        ],
        "bytes_copied": total,
    }


def sync_artifacts(
    hub: Hub, uri: str, dest_slug: str, *, caller_info: CallerInfo
) -> dict[str, Any]:
    if not isinstance(dest_slug, str) or not naming.AGENT_ID_RE.match(dest_slug):
        raise InvalidPath(
            f"dest_slug {dest_slug!r} is not a slug",
            hint="1-40 of [a-z0-9-], e.g. 'run-3'",
        )
    source, files = _source_files(hub, uri)
    dest = f"{ARTIFACTS}{dest_slug}_{source.agent_id}/"
    plan = [(entry, dest + relative) for entry, relative in files]
    return _copy(hub, "/v1/artifacts:sync", uri, source, plan, dest, caller_info)


def sync_shared(hub: Hub, uri: str, dest_path: str, *, caller_info: CallerInfo) -> dict[str, Any]:
    source, files = _source_files(hub, uri)
    parts = naming.validate_components(dest_path.rstrip("/"))
    marker = f"_{source.agent_id}"
    leaf = parts[-1]
    single = len(files) == 1 and files[0][0].path == source.path.rstrip("/")
    stem = leaf.rsplit(".", 1)[0] if single and "." in leaf else leaf
    if not stem.endswith(marker):
        example = f"notes{marker}.md" if single else f"dataset{marker}/"
        raise InvalidPath(
            f"shared resource {dest_path!r} must end its name with {marker!r}",
            hint=f"e.g. dest_path {example!r}",
        )
    dest = SHARED + "/".join(parts)
    naming.check_not_blocked(dest)
    plan = (
        [(files[0][0], dest)]
        if single
        else [(entry, f"{dest}/{relative}") for entry, relative in files]
    )
    return _copy(hub, "/v1/shared-resources:sync", uri, source, plan, dest, caller_info)
