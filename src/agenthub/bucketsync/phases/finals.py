"""Final entries: each agent marks up to FINAL_ENTRIES_MAX of its own results as the ones
its final (private-split) standing is taken from; unmarked, its best public results count.

`POST /v1/results/{filename}:final` marks, `DELETE` unmarks, both with `{source}` (any file
of the caller's scratch bucket proves the bucket's owner, as a directive ack does); only
the result's author may, only before the selection deadline (`schedule.selection_deadline`,
409 PHASE_CLOSED after), and never past the limit (409 FINAL_ENTRIES_LIMIT). The selection
is `final_entries/{agent_id}.json` in the private audit bucket, edited through
`core.shared` (the lock `final entries {agent}`, or compare-and-swap on S3); every
change appends an audit row (route, target, before, after).
"""

from __future__ import annotations

import json
from typing import Any

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.clihints import bucket_cli
from agenthub.bucketsync.core.hub import CallerInfo, Hub
from agenthub.bucketsync.core.shared import edits
from agenthub.bucketsync.core.sources import claim_source, read_source
from agenthub.bucketsync.errors import (
    FinalEntriesLimit,
    Forbidden,
    InvalidRequest,
    NotFound,
    PhaseClosed,
)
from agenthub.bucketsync.phases.schedule import next_hint, selection_deadline, situation

PREFIX = "final_entries/"


def path_of(agent_id: str) -> str:
    return f"{PREFIX}{naming.validate_agent_id(agent_id)}.json"


def marked(hub: Hub, agent_id: str) -> list[str]:
    """The results `agent_id` marked final, in marking order."""
    return _entries(hub.store.read(hub.settings.audit_bucket, path_of(agent_id)))


def _entries(data: bytes | None) -> list[str]:
    """The `marked` list of a stored selection (none: absent or unreadable)."""
    try:
        entries = json.loads(data).get("marked") if data is not None else None
    except (ValueError, AttributeError):
        return []
    return [str(e) for e in entries] if isinstance(entries, list) else []


def every_selection(hub: Hub) -> dict[str, list[str]]:
    """Agent -> the results it marked (agents that marked none are absent)."""
    bucket = hub.settings.audit_bucket
    paths = [e.path for e in hub.store.list(bucket, PREFIX) if e.path.endswith(".json")]
    found: dict[str, list[str]] = {}
    for path, data in (hub.store.read_many(bucket, paths) if paths else {}).items():
        if entries := _entries(data):
            found[path[len(PREFIX) : -len(".json")]] = entries
    return found


def _check_open(hub: Hub) -> None:
    phases = hub.settings.challenge_phases
    if not phases:
        raise PhaseClosed(
            "this challenge has no phases, so no final entries: the leaderboard is final",
            hint="final entries exist when challenge.yaml declares phases",
        )
    deadline = selection_deadline(phases)
    now = hub.clock.now()
    if deadline is not None and now >= deadline:
        raise PhaseClosed(
            f"final entries locked at {naming.iso_now(deadline)}",
            hint="the selection made by then counts; " + next_hint(situation(phases, now)),
        )


def _own_result(hub: Hub, filename: str, agent_id: str) -> None:
    parsed = naming.parse_stamped_filename(filename)
    record = (
        hub.read_model.record(naming.result_path(filename), naming.RESULTS)
        if parsed is not None
        else None
    )
    if record is None or parsed is None:
        raise NotFound(f"no result {filename!r}", hint="list yours with GET /v1/results?agent=")
    if parsed[1] != agent_id:
        raise Forbidden(
            f"{filename} is {parsed[1]}'s result, not {agent_id}'s",
            hint="mark only your own results as final",
        )
    if record.frontmatter.get("status") != "agent-run":
        raise InvalidRequest(
            f"{filename} is not an agent-run result, so it cannot be ranked",
            hint="mark a result with status: agent-run",
        )


def change(
    hub: Hub, filename: str, *, source: str, final: bool, caller_info: CallerInfo
) -> dict[str, Any]:
    """Mark (`final`) or unmark `filename` for the owner of `source`'s bucket; idempotent
    (`changed: false` when it already was so)."""
    _check_open(hub)
    ref = claim_source(hub, source)
    upload = f"{bucket_cli(hub.settings.storage)} cp <file> {source}"
    read_source(hub, ref, source, hint=f"upload any small file there first: {upload}")
    agent = ref.agent_id
    _own_result(hub, filename, agent)
    limit = hub.settings.final_entries_max
    path = path_of(agent)
    for edit in edits(hub, hub.settings.audit_bucket, path, f"final entries {agent}"):
        before = _entries(edit.data)
        after = list(before)
        if final and filename not in after:
            if len(after) >= limit:
                raise FinalEntriesLimit(
                    f"{agent} already marked {len(after)} of {limit} final entries: "
                    + ", ".join(after),
                    hint=f"unmark one first: DELETE /v1/results/{after[0]}:final {{source}}",
                )
            after.append(filename)
        elif not final and filename in after:
            after.remove(filename)
        changed = after != before
        if changed:
            body = {
                "agent": agent,
                "marked": after,
                "updated_at": naming.iso_now(hub.clock.now(), "milliseconds"),
            }
            edit.write(json.dumps(body, sort_keys=True).encode())
    if changed:
        hub.audit.record(
            agent_id=agent,
            route=f"/v1/results/{{filename}}:final ({'mark' if final else 'unmark'})",
            via="bucket",
            source=source,
            target_path=path,
            size=0,
            status_code=200,
            result=filename,
            before=before,
            after=after,
            caller_ip=caller_info.ip,
            user_agent=caller_info.user_agent,
        )
    return {
        "agent": agent,
        "filename": filename,
        "final": final,
        "changed": changed,
        "marked": after,
        "max": limit,
    }
