"""Baseline results: reference rows an organizer promotes (`baseline: true`), shown on the
leaderboard and flagged, never ranked as an agent.

`baseline` is the one result key with a gate, like a message's `broadcast` (seed §11): the
promotion must carry `Authorization: Bearer <token>` of an org admin who is the agent's own
registered `hf_user`; anyone else setting `baseline: true` gets 403 NOT_ORGANIZER (refused,
not ignored, so an author never believes a row is a baseline when it is not). `baseline:
false` is the default and is dropped. A file an admin edits into the bucket directly keeps
its flag, as a human verdict does: the central bucket has no other writers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agenthub.bucketsync.core.access import bearer_caller, require_organizer, require_registered
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.errors import IdentityMismatch, InvalidFrontmatter, NotOrganizer

BASELINE = "baseline"


def is_baseline(fm: Mapping[str, Any]) -> bool:
    return fm.get(BASELINE) is True


def gate_baseline(
    hub: Hub, fields: dict[str, Any], agent_id: str, authorization: str | None
) -> dict[str, Any]:
    """The result's client fields with `baseline` checked: kept only for an organizer."""
    if BASELINE not in fields:
        return fields
    value = fields[BASELINE]
    if not isinstance(value, bool):
        raise InvalidFrontmatter(
            f"'baseline' must be true or false, got {value!r}", hint="baseline: true"
        )
    if not value:
        return {k: v for k, v in fields.items() if k != BASELINE}
    if not authorization:
        raise NotOrganizer(
            "only organizers can promote a baseline result, and this promotion carries no token",
            hint="promote it with Authorization: Bearer <organizer token>, or drop baseline",
        )
    caller = bearer_caller(hub, authorization)
    require_organizer(
        hub,
        caller.user,
        caller.email,
        action="promote a baseline result",
        hint="drop baseline: true to promote an ordinary result",
    )
    registered = require_registered(hub, agent_id).frontmatter.get("hf_user")
    if registered != caller.user:
        raise IdentityMismatch(
            f"agent {agent_id!r} is registered to {registered!r}, not to {caller.user!r}",
            hint="promote baselines from an agent registered to you",
        )
    return fields
