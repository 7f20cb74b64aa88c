"""Taskforces: group workspaces agents create themselves at `taskforces/{name}/`, served
on agent-collabs' wire. (Channels, seed §12, are the organizers' rooms; both are served.)

A taskforce exists iff `taskforces/{name}/README.md` does, so creating one IS writing its
README and no taskforce is ever without one. The creator owns the README; any registered
agent adds stamped notes (`{stamp}_{agent_id}.md`) or named files whose `dest_path`
carries `_{agent_id}`, so who contributed what is read off the file names (no roster).
Everything derives from ONE recursive `taskforces/` listing. Reads are in `read.py`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agenthub.bucketsync.core import frontmatter, naming
from agenthub.bucketsync.core.access import require_registered
from agenthub.bucketsync.core.clihints import bucket_cli
from agenthub.bucketsync.core.hub import CallerInfo, Hub
from agenthub.bucketsync.core.naming import SourceRef
from agenthub.bucketsync.core.records import stamp_record
from agenthub.bucketsync.core.sources import claim_source, read_source
from agenthub.bucketsync.errors import (
    BodyOrSourceRequired,
    InvalidPath,
    InvalidRequest,
    PayloadTooLarge,
    SourceNotFound,
    SyncTooLarge,
    TaskforceExists,
    TaskforceNotFound,
)
from agenthub.bucketsync.storage.base import Batch, FileEntry

TASKFORCES = "taskforces/"
README = "README.md"
# Keys the server stamps; a client's key of the same name never reaches the file.
README_KEYS = ("taskforce", "creator", "created", "updated", "via")
NOTE_KEYS = ("agent", "timestamp", "via", "taskforce")


@dataclass(frozen=True)
class Taskforce:
    name: str
    files: Mapping[str, FileEntry]  # path inside taskforces/{name}/ -> its entry

    @property
    def folder(self) -> str:
        return f"{TASKFORCES}{self.name}/"

    @property
    def notes(self) -> list[str]:
        """Every markdown file but the README (stamped notes and named `.md` files), in
        path order."""
        return sorted(path for path in self.files if path.endswith(".md") and not is_readme(path))


def is_readme(path: str) -> bool:
    return path.rsplit("/", 1)[-1].lower() == README.lower()


def readme_path(name: str) -> str:
    return f"{TASKFORCES}{name}/{README}"


def marker(agent_id: str) -> re.Pattern[str]:
    """`_{agent_id}` as an attribution marker: not followed by more id characters, so
    `_agent-1` does not mark `x_agent-10.json`."""
    return re.compile(rf"_{re.escape(agent_id)}(?![a-z0-9-])")


def validate_name(name: str) -> str:
    return naming.validate_room_name(name, kind="taskforce", example="kernel-research")


def _index(entries: dict[str, FileEntry]) -> dict[str, Taskforce]:
    groups: dict[str, dict[str, FileEntry]] = {}
    for path, entry in entries.items():
        name, _, inside = path[len(TASKFORCES) :].partition("/")
        if inside:  # a stray file right under taskforces/ belongs to no taskforce
            groups.setdefault(name, {})[inside] = entry
    return {name: Taskforce(name, files) for name, files in groups.items() if README in files}


def taskforces_index(hub: Hub) -> dict[str, Taskforce]:
    return hub.read_model.derived(TASKFORCES, "taskforces", _index)


def require_taskforce(hub: Hub, name: str) -> Taskforce:
    validate_name(name)
    taskforce = taskforces_index(hub).get(name)
    if taskforce is None:
        raise TaskforceNotFound(
            f"there is no taskforce {name!r}",
            hint="GET /v1/taskforces lists them; create one with POST /v1/taskforces "
            "{name, agent_id, body} (the body is its README)",
        )
    return taskforce


@dataclass(frozen=True)
class Draft:
    """What a request writes: its author, how it came (`bucket` or `raw`), the client's
    frontmatter and body, and (for `bucket`) the source bytes the dedup keys on."""

    author: str
    via: str
    client_fm: dict[str, Any]
    body: str
    source: str | None = None
    data: bytes | None = None


def _require_one(source: str | None, agent_id: str | None, body: str | None) -> None:
    if (source is not None) == (agent_id is not None or body is not None) or (
        source is None and (agent_id is None or body is None)
    ):
        raise BodyOrSourceRequired(
            "send exactly one of {source} or {agent_id, body}",
            hint='{"source": "hf://buckets/ORG/SLUG-you/notes.md"} or '
            '{"agent_id": "you", "body": "text"}',
        )


def _check_size(hub: Hub, size: int, what: str) -> None:
    if size > hub.settings.max_source_bytes:
        raise PayloadTooLarge(
            f"the {what} is {size} bytes; the limit is {hub.settings.max_source_bytes}",
            hint="shorten it, or add a named file with {source, dest_path}",
        )


def _from_source(hub: Hub, ref: SourceRef, uri: str) -> Draft:
    data = read_source(hub, ref, uri)
    _check_size(hub, len(data), "source")
    document = frontmatter.parse_strict(data)
    return Draft(ref.agent_id, "bucket", dict(document.frontmatter), document.body, uri, data)


def _from_raw(hub: Hub, agent_id: str, body: str, client_fm: dict[str, Any]) -> Draft:
    naming.validate_agent_id(agent_id)
    require_registered(hub, agent_id)
    hub.limiters.raw_messages.acquire(agent_id)
    _check_size(hub, len(body.encode("utf-8")), "body")
    return Draft(agent_id, "raw", client_fm, body)


def _draft(hub: Hub, source: str | None, agent_id: str | None, body: str | None) -> Draft:
    _require_one(source, agent_id, body)
    if source is not None:
        return _from_source(hub, claim_source(hub, source), source)
    assert agent_id is not None and body is not None
    return _from_raw(hub, agent_id, body, {})


def _now_iso(hub: Hub) -> str:
    return naming.iso_now(hub.clock.now(), "milliseconds")


def create(
    hub: Hub,
    *,
    name: str,
    source: str | None,
    agent_id: str | None,
    body: str | None,
    caller_info: CallerInfo,
) -> tuple[int, dict[str, Any]]:
    """Create a taskforce by writing its README (201), or update the README as its
    creator (200, `created` kept and `updated` stamped). No board announcement: the
    creator recruits on the board themselves."""
    validate_name(name)
    draft = _draft(hub, source, agent_id, body)
    path = readme_path(name)
    existing = hub.read_model.record(path, TASKFORCES)
    if existing is not None:
        creator = existing.frontmatter.get("creator")
        if creator != draft.author:
            raise TaskforceExists(
                f"taskforce {name!r} already exists (creator: {creator})",
                hint=f"only its creator updates the README; contribute with POST "
                f"/v1/taskforces/{name}/files, or pick another name",
            )
        server = {
            "taskforce": name,
            "creator": creator,
            "created": existing.frontmatter.get("created"),
            "updated": _now_iso(hub),
            "via": draft.via,
        }
    else:
        server = {
            "taskforce": name,
            "creator": draft.author,
            "created": _now_iso(hub),
            "via": draft.via,
        }
    fields = {k: v for k, v in draft.client_fm.items() if k not in README_KEYS}
    data = frontmatter.render({**server, **fields}, draft.body)
    if draft.data is not None:
        with hub.dedup.claim(draft.data, f"{TASKFORCES}{name}/") as written:
            hub.write_central([(path, data)])
            written.append(README)
    else:
        hub.write_central([(path, data)])
    status = 200 if existing is not None else 201
    _audit(hub, draft, "/v1/taskforces", path, len(data), status, caller_info, name, "readme")
    return status, {"name": name, "via": draft.via, "path": path, "created": existing is None}


def contribute(
    hub: Hub,
    name: str,
    *,
    source: str | None,
    dest_path: str | None,
    agent_id: str | None,
    body: str | None,
    type: str | None,
    caller_info: CallerInfo,
) -> dict[str, Any]:
    """`POST /v1/taskforces/{name}/files`: a stamped note (`{agent_id, body, type?}` or
    `{source}`), or with `dest_path` a named file copied byte for byte from the source."""
    taskforce = require_taskforce(hub, name)
    if dest_path is not None and source is None:
        raise InvalidRequest(
            "dest_path names a file promoted from your bucket: it needs source",
            hint='{"source": "hf://buckets/ORG/SLUG-you/out/x.json", "dest_path": "x_you.json"}',
        )
    if dest_path is not None and type is not None:
        raise InvalidRequest(
            "type applies to notes; a named file is copied as it is", hint="drop type"
        )
    if dest_path is not None:
        assert source is not None
        return _named_file(
            hub, taskforce, claim_source(hub, source), source, dest_path, caller_info
        )
    _require_one(source, agent_id, body)
    if source is not None:
        draft = _from_source(hub, claim_source(hub, source), source)
        draft.client_fm.setdefault("type", "note")
    else:
        assert agent_id is not None and body is not None
        draft = _from_raw(hub, agent_id, body, {"type": type or "note"})
    fields = {k: v for k, v in draft.client_fm.items() if k not in NOTE_KEYS}
    fields["taskforce"] = name
    folder = taskforce.folder

    def publish() -> tuple[str, str, int]:
        entries = hub.read_model.entries(TASKFORCES)
        filename, data = stamp_record(
            hub,
            draft.author,
            via=draft.via,
            fields=fields,
            body=draft.body,
            taken=lambda leaf: f"{folder}{leaf}" in entries,
        )
        hub.write_central([(f"{folder}{filename}", data)])
        return filename, f"{folder}{filename}", len(data)

    if draft.data is not None:
        with hub.dedup.claim(draft.data, folder) as written:
            filename, path, size = publish()
            written.append(filename)
    else:
        filename, path, size = publish()
    route = "/v1/taskforces/{name}/files"
    _audit(hub, draft, route, path, size, 201, caller_info, name, "note")
    return {"kind": "note", "filename": filename, "via": draft.via, "path": path}


def _named_file(
    hub: Hub,
    taskforce: Taskforce,
    ref: SourceRef,
    uri: str,
    dest_path: str,
    caller_info: CallerInfo,
) -> dict[str, Any]:
    """A byte-identical hash copy (the bytes never transit the service). No dedup:
    promoting your own path again is how a named file is updated."""
    parts = naming.validate_components(dest_path)
    if is_readme(dest_path):
        raise InvalidPath(
            "README.md is reserved: the taskforce's README is written by POST /v1/taskforces",
            hint="name your file differently",
        )
    if not marker(ref.agent_id).search(dest_path):
        raise InvalidPath(
            f"dest_path {dest_path!r} must include _{ref.agent_id} (attribution is in the name)",
            hint=f"e.g. 'profiles/flash_attn_{ref.agent_id}.json' or 'data_{ref.agent_id}/x.csv'",
        )
    entry = next((e for e in hub.store.list(ref.bucket, ref.path) if e.path == ref.path), None)
    if entry is None:
        raise SourceNotFound(
            f"{uri} is not a file", hint=f"{bucket_cli(hub.settings.storage)} cp <file> {uri}"
        )
    if entry.size > hub.settings.sync_max_bytes:
        raise SyncTooLarge(
            f"{uri} is {entry.size} bytes; a named file is at most {hub.settings.sync_max_bytes}",
            hint="split it into several files",
        )
    target = taskforce.folder + "/".join(parts)
    hub.store.write_batch(hub.central, Batch(copies=[(ref.bucket, entry.content_hash, target)]))
    # The bytes were copied by hash, never read: the next read re-lists the folder.
    hub.read_model.invalidate(TASKFORCES)
    hub.announce_folders({TASKFORCES})
    draft = Draft(ref.agent_id, "bucket", {}, "", uri)
    route = "/v1/taskforces/{name}/files"
    _audit(hub, draft, route, target, entry.size, 201, caller_info, taskforce.name, "file")
    return {"kind": "file", "filename": dest_path, "via": "bucket", "path": target}


def _audit(
    hub: Hub,
    draft: Draft,
    route: str,
    target: str,
    size: int,
    status: int,
    caller_info: CallerInfo,
    taskforce: str,
    kind: str,
) -> None:
    hub.audit.record(
        agent_id=draft.author,
        route=route,
        via=draft.via,
        source=draft.source,
        target_path=target,
        size=size,
        status_code=status,
        taskforce=taskforce,
        kind=kind,
        caller_ip=caller_info.ip,
        user_agent=caller_info.user_agent,
    )
