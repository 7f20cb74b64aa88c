"""Promoted sources (seed §4): a file or folder in an agent's scratch bucket that a write
copies into the central bucket. Every promotion resolves its source here."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agenthub.bucketsync.core import idempotency, journal
from agenthub.bucketsync.core.access import require_registered
from agenthub.bucketsync.core.clihints import bucket_cli
from agenthub.bucketsync.core.hub import CallerInfo, Hub
from agenthub.bucketsync.core.naming import SourceRef
from agenthub.bucketsync.core.records import stamp_record
from agenthub.bucketsync.errors import SourceNotFound


def claim_source(
    hub: Hub, uri: str, *, check: Callable[[SourceRef], object] | None = None
) -> SourceRef:
    """Parse `uri` (a scratch bucket, never central/audit), run `check` on it, require its
    agent to be registered, and charge the bucket's source-write limit."""
    source = hub.parse_source(uri)
    if check is not None:
        check(source)
    require_registered(hub, source.agent_id)
    hub.limiters.source_writes.acquire(source.bucket)
    return source


def read_source(hub: Hub, source: SourceRef, uri: str, *, hint: str | None = None) -> bytes:
    """The source file's bytes; `SourceNotFound` (with `hint`, by default how to upload
    it) when it is not there."""
    data = hub.store.read(source.bucket, source.path)
    if data is None:
        raise SourceNotFound(
            f"{uri} does not exist",
            hint=hint or f"{bucket_cli(hub.settings.storage)} cp <local file> {uri}",
        )
    return data


def promote_stamped(
    hub: Hub,
    source: SourceRef,
    data: bytes,
    *,
    folder: str,
    fields: Mapping[str, Any],
    body: str,
    route: str,
    caller_info: CallerInfo,
    before: Callable[[str], list[tuple[str, bytes]]] | None = None,
    answer: Callable[[str, str], dict[str, Any]] | None = None,
) -> tuple[str, str]:
    """Promote `data` (read from `source`) as a new `{folder}{stamp}_{agent}.md`, stamped
    `via: bucket` ahead of `fields`, under the promoted-hash dedup of (data, folder) (409
    ALREADY_PROMOTED on a repeat), written through the store and audited. Returns
    (filename, path): a result and a claim are promoted here. `before(filename)` names
    files written ahead of the record in the same batch (a result's pin), so the record
    is never visible without them. With `answer(filename, path)` (the 201 body) the write
    is journaled (`core.journal`): a crash after the record landed still records that
    answer for the request's Idempotency-Key, so a retry gets it instead of a 409."""
    with hub.dedup.claim(data, folder) as written:
        entries = hub.read_model.entries(folder)
        filename, rendered = stamp_record(
            hub,
            source.agent_id,
            via="bucket",
            fields=fields,
            body=body,
            taken=lambda name: f"{folder}{name}" in entries,
        )
        path = f"{folder}{filename}"
        try:
            ahead = before(filename) if before is not None else []
        except BaseException:
            hub.stamps.settle([filename])  # refused: the stamp holds no stream back
            raise
        write_id = hub.audit.new_write_id()
        row = hub.audit.row(
            agent_id=source.agent_id,
            route=route,
            via="bucket",
            source=source.uri,
            target_path=path,
            size=len(rendered),
            status_code=201,
            caller_ip=caller_info.ip,
            user_agent=caller_info.user_agent,
            write_id=write_id,
        )
        entry = None
        if answer is not None:
            pid, host = journal.owner()
            entry = journal.Entry(
                write_id=write_id,
                board_path=path,
                derived=ahead,
                audit_row=row,
                answer=answer(filename, path),
                attempt=idempotency.current.get(),
                pid=pid,
                host=host,
                at=hub.clock.now().timestamp(),
            )
            journal.begin(hub, entry)
        try:
            hub.write_central([*ahead, (path, rendered)])
        except BaseException:
            if entry is not None:
                journal.roll_back(hub, entry)
            raise
        written.append(filename)
    if entry is not None:
        journal.complete(hub, entry, audit=True)  # the audit row rides in the closing batch
    else:
        hub.audit.append(row)
    return filename, path
