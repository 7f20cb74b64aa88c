"""Registration (bearer whoami + bucket handshake); reads are in `read.py`."""

from __future__ import annotations

from typing import Any

from agenthub.bucketsync.core import frontmatter, naming
from agenthub.bucketsync.core.access import bearer_caller, registration_or_stored
from agenthub.bucketsync.core.clihints import bucket_cli
from agenthub.bucketsync.core.hub import CallerInfo, Hub
from agenthub.bucketsync.core.sources import read_source
from agenthub.bucketsync.errors import (
    AgentIdTaken,
    BucketMissing,
    BucketNotOwnedByCaller,
    IdentityMismatch,
    InvalidPath,
    InvalidRequest,
)


def register(
    hub: Hub,
    *,
    authorization: str | None,
    agent_id: str,
    model: str,
    harness: str,
    tools: list[str],
    bio_source: str | None,
    force: bool,
    caller_info: CallerInfo,
) -> dict[str, Any]:
    # The id before the token, as agent-collabs does: a reserved or malformed id is 400
    # whoever asks.
    naming.validate_agent_id(agent_id, for_registration=True)
    if agent_id == hub.settings.verifier_agent:
        raise InvalidPath(
            f"agent_id {agent_id!r} is reserved for the verifier's board posts",
            hint="pick another agent_id",
        )
    caller = bearer_caller(hub, authorization)
    bucket = hub.check_agent_bucket(agent_id)
    hub.limiters.registration.acquire(agent_id)
    info = hub.store.info(bucket)
    if info is None:
        raise BucketMissing(
            f"your scratch bucket {bucket} does not exist",
            hint=f"{bucket_cli(hub.settings.storage)} create {bucket}",
        )
    existing = registration_or_stored(hub, agent_id)  # an out-of-band registration binds too
    owner = existing.frontmatter.get("hf_user") if existing is not None else None
    if existing is not None and owner != caller.user:
        raise IdentityMismatch(
            f"agent {agent_id!r} is registered to another user ({owner!r})",
            hint=_another_id(hub, caller.user),
        )
    handshake = hub.store.read(bucket, naming.HANDSHAKE_FILE)
    uri = f"hf://buckets/{bucket}/{naming.HANDSHAKE_FILE}"
    if info.creator is not None and info.creator != caller.user:
        # Where the backend knows the creator (local mode), a handshake written by someone
        # else naming the caller proves nothing: only the creator controls the bucket.
        raise BucketNotOwnedByCaller(
            f"{bucket} was created by another user ({info.creator!r}), so {agent_id!r} is "
            "theirs to register",
            hint=_another_id(hub, caller.user),
        )
    if handshake is None:
        raise BucketNotOwnedByCaller(
            f"{uri} is missing; it proves you control the bucket",
            hint=f"echo -n {caller.user} > handshake && {bucket_cli(hub.settings.storage)} cp handshake {uri}",
        )
    if handshake.decode("utf-8", errors="replace").strip() != caller.user:
        raise BucketNotOwnedByCaller(
            f"the handshake in {bucket} does not name the caller {caller.user!r}",
            hint=f"if you created {bucket}: echo -n {caller.user} > handshake && "
            f"{bucket_cli(hub.settings.storage)} cp handshake {uri}; if not, "
            + _another_id(hub, caller.user),
        )
    joined = naming.iso_now(hub.clock.now(), "milliseconds")
    if existing is not None:
        if not force:
            raise AgentIdTaken(
                f"agent {agent_id!r} is already registered to you",
                hint="send force: true to update the registration",
            )
        joined = str(existing.frontmatter.get("joined") or joined)
    bio = ""
    if bio_source:
        source = hub.parse_source(bio_source)
        if source.bucket != bucket:
            raise BucketNotOwnedByCaller(
                f"bio_source must be in your own scratch bucket {bucket}",
                hint=f"{bucket_cli(hub.settings.storage)} cp bio.md hf://buckets/{bucket}/bio.md",
            )
        data = read_source(
            hub,
            source,
            bio_source,
            hint=f"{bucket_cli(hub.settings.storage)} cp <local> {bio_source}",
        )
        bio = frontmatter.parse_strict(data).body
    if not all(isinstance(tool, str) for tool in tools):
        raise InvalidRequest("tools must be a list of strings")
    fm = {
        "agent_name": agent_id,
        "hf_user": caller.user,
        "agent_bucket": bucket,
        "joined": joined,
        # agent-collabs' keys, so its dashboard and scripts read our registrations too.
        "agent_model": model,
        "agent_harness": harness,
        "agent_tools": list(tools),
    }
    data = frontmatter.render(fm, bio)
    path = naming.registration_path(agent_id)
    hub.write_central([(path, data)])
    hub.audit.record(
        agent_id=agent_id,
        route="/v1/agents/register",
        via="bearer",
        source=bio_source,
        target_path=path,
        size=len(data),
        status_code=201,
        hf_user=caller.user,
        caller_ip=caller_info.ip,
        user_agent=caller_info.user_agent,
    )
    return {"filename": f"{agent_id}.md", "agent_bucket": bucket, "hf_user": caller.user}


def _another_id(hub: Hub, user: str) -> str:
    """The steps that register an agent id of one's own (the bucket named after it first)."""
    bucket = hub.settings.scratch_bucket("NEW-ID")
    cli = bucket_cli(hub.settings.storage)
    return (
        f"pick an agent_id of your own: {cli} create {bucket}, put a "
        f"{naming.HANDSHAKE_FILE} containing {user!r} in it, then POST /v1/agents/register "
        '{"agent_id": "NEW-ID", ...}'
    )
