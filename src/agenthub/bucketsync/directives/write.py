"""Posting and acknowledging directives.

A directive is an organizer broadcast (seed §11: the same gate, the same one-batch write,
the same read-time union into every inbox) with the server-owned keys `ack_required: true`
and, to replace an earlier one, `supersedes: <filename>`. An agent acknowledges it with a
file of its own scratch bucket as proof (the channel-membership bar, seed §12); the ack is
one marker `acks/{directive stem}/{handle}.md`, written once — no read-modify-write.
"""

from __future__ import annotations

from typing import Any

from agenthub.bucketsync.board import write as board
from agenthub.bucketsync.core import frontmatter, naming
from agenthub.bucketsync.core.clihints import bucket_cli
from agenthub.bucketsync.core.hub import CallerInfo, Hub
from agenthub.bucketsync.core.sources import claim_source, read_source
from agenthub.bucketsync.directives import read
from agenthub.bucketsync.errors import Conflict, InvalidRequest


def post_directive(
    hub: Hub,
    *,
    agent_id: str,
    body: str,
    supersedes: str | None,
    authorization: str | None,
    caller_info: CallerInfo,
) -> dict[str, Any]:
    """Broadcast `body` as a directive from organizer `agent_id` (`human-<name>` + Bearer)."""
    if not body.strip():
        raise InvalidRequest("the directive's body is empty", hint="say what agents must do")
    extra: list[tuple[str, Any]] = [("ack_required", True)]
    if supersedes is not None:
        replaced = read.require_directive(hub, supersedes)
        newer = read.directives(hub).superseded_by.get(replaced.filename)
        if newer is not None:
            raise Conflict(
                f"{supersedes} was already superseded by {newer}",
                hint=f"supersede the active directive instead: supersedes: {newer}",
            )
        extra.append(("supersedes", supersedes))
    answer = board.promote(
        hub,
        board.MessageRequest(
            agent_id=agent_id, body=body, type="directive", broadcast=True, extra=tuple(extra)
        ),
        authorization=authorization,
        caller_info=caller_info,
    )
    return answer | {"ack_required": True, "supersedes": supersedes}


def ack(hub: Hub, filename: str, *, source: str, caller_info: CallerInfo) -> dict[str, Any]:
    """Acknowledge directive `filename` as the owner of `source`'s scratch bucket; acking
    twice changes nothing."""
    directive = read.require_directive(hub, filename)
    ref = claim_source(hub, source)
    upload = f"{bucket_cli(hub.settings.storage)} cp <file> {source}"
    read_source(hub, ref, source, hint=f"upload any small file there first: {upload}")
    handle = ref.agent_id
    path = naming.ack_path(directive.filename, handle)
    changed = handle not in read.acked_by(hub, directive.filename)
    if changed:
        marker = frontmatter.render(
            {
                "directive": directive.filename,
                "agent": handle,
                "acked": naming.iso_now(hub.clock.now(), "milliseconds"),
                "via": "bucket",
            },
            "",
        )
        hub.write_central([(path, marker)])
        hub.audit.record(
            agent_id=handle,
            route=f"/v1/directives/{directive.filename}/ack",
            via="bucket",
            source=source,
            target_path=path,
            size=len(marker),
            status_code=200,
            caller_ip=caller_info.ip,
            user_agent=caller_info.user_agent,
        )
    return {
        "directive": directive.filename,
        "handle": handle,
        "acked": True,
        "changed": changed,
        "path": path,
    }
