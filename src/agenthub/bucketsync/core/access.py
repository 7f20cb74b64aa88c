"""Who may act: the bearer caller, registration lookups, organizer and handle checks."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.readmodel import Record, needs_bucket
from agenthub.bucketsync.errors import (
    InvalidPath,
    NotOrganizer,
    NotRegistered,
    OrganizerCheckUnavailable,
    StorageUnavailable,
    Unauthorized,
)
from agenthub.bucketsync.identity.base import Caller
from agenthub.bucketsync.storage.base import FileEntry


def bearer_caller(hub: Hub, authorization: str | None) -> Caller:
    """Resolve `Authorization: Bearer <token>` through the Identity port (401 otherwise)."""
    if not authorization:
        raise Unauthorized(
            "this endpoint needs Authorization: Bearer <token>",
            hint="send your HF token as a Bearer token",
        )
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("the Authorization header must be 'Bearer <token>'")
    return hub.identity.whoami(token.strip())


def is_registered(hub: Hub, agent_id: str) -> bool:
    return naming.registration_path(agent_id) in hub.read_model.entries(naming.AGENTS)


def registered_agents(hub: Hub) -> Sequence[str]:
    """Every registered agent id, sorted (the AGENTS listing, no record read), built once
    per listing: a broadcast names its whole audience."""
    return hub.read_model.derived(naming.AGENTS, "handles", _agent_ids)


def _agent_ids(entries: Mapping[str, FileEntry]) -> tuple[str, ...]:
    return tuple(
        sorted(
            path[len(naming.AGENTS) : -len(".md")]
            for path in entries
            if path.endswith(".md") and "/" not in path[len(naming.AGENTS) :]
        )
    )


def registration(hub: Hub, agent_id: str) -> Record | None:
    return hub.read_model.record(naming.registration_path(agent_id), naming.AGENTS)


def registration_or_stored(hub: Hub, agent_id: str) -> Record | None:
    """`registration`, and on a miss the file as stored now: a registration an organizer
    wrote out of band (seed §7) counts at once, not a listing TTL later. One store read,
    on a miss only; a hit joins the read model, so the next lookup is a cache hit."""
    record = registration(hub, agent_id)
    if record is not None:
        return record
    try:
        naming.validate_agent_id(agent_id)
    except InvalidPath:
        return None  # nothing by that name can be stored: no read
    needs_bucket(f"the stored registration of {agent_id}")
    path = naming.registration_path(agent_id)
    data = hub.store.read(hub.central, path)
    if data is None:
        return None
    entry = FileEntry(path=path, size=len(data), content_hash=hashlib.sha256(data).hexdigest())
    hub.read_model.write_through(naming.AGENTS, entry, data)
    return registration(hub, agent_id)


def require_registered(hub: Hub, agent_id: str) -> Record:
    record = registration_or_stored(hub, agent_id)
    if record is None:
        raise _not_registered(agent_id)
    return record


def check_registered(hub: Hub, agent_id: str) -> None:
    """`require_registered` answered by the listing, without loading the record (a miss
    still reads the stored file, as `registration_or_stored` does)."""
    if not is_registered(hub, agent_id) and registration_or_stored(hub, agent_id) is None:
        raise _not_registered(agent_id)


def _not_registered(agent_id: str) -> NotRegistered:
    return NotRegistered(
        f"agent {agent_id!r} is not registered", hint="register first: POST /v1/agents/register"
    )


def require_organizer(
    hub: Hub,
    user: str,
    email: str | None,
    *,
    action: str = "broadcast",
    hint: str = "post without broadcast",
) -> None:
    """The caller is an admin of the challenge org (fail-closed: a failed lookup is 503)."""
    try:
        role = hub.identity.org_role(hub.settings.org, user, email)
    except StorageUnavailable as exc:
        raise OrganizerCheckUnavailable(
            "could not check organizer status; nothing was posted",
            hint="retry in a few seconds",
        ) from exc
    if role != "admin":
        raise NotOrganizer(f"only organizers (org admins) can {action}", hint=hint)


def require_handle(hub: Hub, handle: str) -> str:
    """A handle a read may watch: `human-*` or a registered agent (checked before parking)."""
    naming.validate_handle(handle)
    if not naming.is_human_handle(handle):
        require_registered(hub, handle)
    return handle
