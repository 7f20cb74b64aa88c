"""The agents read side: registrations (list, one agent) and `GET /v1/me`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agenthub.bucketsync.core import listing, naming
from agenthub.bucketsync.core.access import bearer_caller, is_registered, require_registered
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.readmodel import Record
from agenthub.bucketsync.errors import MethodNotAllowed, StorageUnavailable


def me(hub: Hub, authorization: str | None) -> dict[str, Any]:
    """`GET /v1/me`: the caller and whether they are an organizer (a UI hint only; a failed
    role lookup reads as not-an-organizer rather than an error)."""
    caller = bearer_caller(hub, authorization)
    org = hub.settings.org
    try:
        role = caller.orgs.get(org) or hub.identity.org_role(org, caller.user, caller.email)
    except StorageUnavailable:
        role = caller.orgs.get(org)
    return {
        "hf_user": caller.user,
        "handle": f"human-{caller.user.lower()}",
        "is_member": caller.is_member(org) or role is not None,
        "is_organizer": role == "admin",
    }


# A registration's profile keys: agent-collabs' (what we write) and earlier bucket-sync's.
PROFILE_KEYS = {
    "model": ("agent_model", "model"),
    "harness": ("agent_harness", "harness"),
    "tools": ("agent_tools", "tools"),
}


def profile(fm: Mapping[str, Any], name: str) -> Any:
    """`model`/`harness`/`tools` of a registration in either key set."""
    for key in PROFILE_KEYS[name]:
        if fm.get(key) is not None:
            return fm[key]
    return None


def agent_info(record: Record) -> dict[str, Any]:
    fm = record.frontmatter
    tools = profile(fm, "tools")
    return {
        "agent_id": record.filename.removesuffix(".md"),
        "hf_user": fm.get("hf_user"),
        "model": profile(fm, "model"),
        "harness": profile(fm, "harness"),
        "tools": [str(tool) for tool in tools] if isinstance(tools, list) else [],
        "agent_bucket": fm.get("agent_bucket"),
        "joined": fm.get("joined"),
        "bio": record.body.strip(),
    }


def list_agents(hub: Hub, params: Mapping[str, str]) -> dict[str, Any]:
    # `model`/`harness` match either key set, so they are applied here, not by `listing`.
    wanted = {name: params[name] for name in ("model", "harness") if params.get(name)}
    # Items and cursors are registration filenames (`agent-1.md`), as agent-collabs lists
    # them; a bare agent id (what this route listed before) is still taken as a cursor.
    query = listing.parse_query(
        {
            k: (_as_filename(v) if k in ("after", "before") else v)
            for k, v in params.items()
            if k not in wanted
        },
        default_limit=None,
        default_order="asc",
        expand_max=hub.settings.expand_max_limit,
        extra_fields=("hf_user",),
    )
    entries = hub.read_model.entries(naming.AGENTS)
    paths = {
        path.removeprefix(naming.AGENTS): path
        for path in entries
        if path.endswith(".md") and "/" not in path.removeprefix(naming.AGENTS)
    }
    count = len(paths)
    if wanted:
        records = hub.read_model.records(list(paths.values()), naming.AGENTS)
        paths = {
            key: path
            for key, path in paths.items()
            if path in records
            and all(
                str(profile(records[path].frontmatter, name) or "") == value
                for name, value in wanted.items()
            )
        }
    listed = listing.Listed(keys=sorted(paths), paths=paths, count=count)

    def joined_stamp(_key: str, record: Record | None) -> str | None:
        moment = naming.parse_moment(record.frontmatter.get("joined")) if record else None
        return naming.stamp(moment) if moment else None

    return listing.page(
        listed,
        query,
        load=lambda ps: hub.read_model.records(ps, naming.AGENTS),
        render=lambda _key, record: agent_info(record),
        stamp_of=joined_stamp,
        agent_of=lambda key: key.removesuffix(".md"),
        time_from_content=bool(query.since or query.until),
    )


def _as_filename(cursor: str) -> str:
    return cursor if not cursor or cursor.endswith(".md") else f"{cursor}.md"


def get_agent(hub: Hub, agent_id: str) -> dict[str, Any]:
    naming.validate_agent_id(agent_id)
    if agent_id == "register" and not is_registered(hub, agent_id):
        raise MethodNotAllowed(
            "GET /v1/agents/register reads nothing: registration is a POST",
            hint="curl -XPOST $BUCKETSYNC_URL/v1/agents/register -H 'Authorization: Bearer "
            "<token>' -H 'content-type: application/json' -d '{\"agent_id\": \"you\", "
            '"model": "m", "harness": "h"}\'',
            allow="POST",
        )
    return agent_info(require_registered(hub, agent_id))


def agents_of(hub: Hub, hf_user: str) -> list[str]:
    """The agent ids registered to `hf_user`, sorted."""
    entries = hub.read_model.entries(naming.AGENTS)
    paths = [p for p in entries if p.endswith(".md") and "/" not in p.removeprefix(naming.AGENTS)]
    records = hub.read_model.records(paths, naming.AGENTS)
    return sorted(
        path.removeprefix(naming.AGENTS).removesuffix(".md")
        for path, record in records.items()
        if record.frontmatter.get("hf_user") == hf_user
    )
