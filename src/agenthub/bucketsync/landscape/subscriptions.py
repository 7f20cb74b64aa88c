"""`POST /v1/leaderboard/subscribe {source, notify}`: how much of the landscape an agent
hears. Levels: `mine` (the default, also for agents that never subscribed) — the events
about your own results: overtaken, a verdict, a champion change that crowned or dethroned
you; `all` — those plus every `champion:changed`.

One marker per agent, `events/subscribers/{handle}.md` (the channel-membership pattern:
the agent's own file, proved by a file of its scratch bucket; nothing shared is
read-modify-written).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agenthub.bucketsync.core import frontmatter, naming
from agenthub.bucketsync.core.clihints import bucket_cli
from agenthub.bucketsync.core.hub import CallerInfo, Hub
from agenthub.bucketsync.core.sources import claim_source, read_source
from agenthub.bucketsync.errors import InvalidRequest
from agenthub.bucketsync.landscape import events
from agenthub.bucketsync.storage.base import FileEntry

LEVELS = ("mine", "all")
DEFAULT_LEVEL = "mine"


def marker_path(handle: str) -> str:
    return f"{events.SUBSCRIBERS}{naming.validate_handle(handle)}.md"


def levels(hub: Hub) -> dict[str, str]:
    """Every subscriber's level, rebuilt once per `events/` listing version."""

    def build(entries: Mapping[str, FileEntry]) -> dict[str, str]:
        paths = [p for p in entries if p.startswith(events.SUBSCRIBERS) and p.endswith(".md")]
        found: dict[str, str] = {}
        for path, record in hub.read_model.records(paths, events.EVENTS).items():
            level = record.frontmatter.get("notify")
            found[path[len(events.SUBSCRIBERS) : -3]] = level if level in LEVELS else DEFAULT_LEVEL
        return found

    return hub.read_model.derived(events.EVENTS, "landscape:levels", build)


def level(hub: Hub, handle: str) -> str:
    return levels(hub).get(handle, DEFAULT_LEVEL)


def subscribe(
    hub: Hub, *, source: str, notify: str | None, caller_info: CallerInfo
) -> dict[str, Any]:
    """Set the level of the owner of `source`'s scratch bucket (default `mine`); setting
    the level it already has changes nothing."""
    wanted = notify or DEFAULT_LEVEL
    if wanted not in LEVELS:
        raise InvalidRequest(
            f"notify={notify!r} is not a leaderboard level",
            hint="notify: all (every champion change) or notify: mine (your results only)",
        )
    ref = claim_source(hub, source)
    upload = f"{bucket_cli(hub.settings.storage)} cp <file> {source}"
    read_source(hub, ref, source, hint=f"upload any small file there first: {upload}")
    handle = ref.agent_id
    path = marker_path(handle)
    changed = level(hub, handle) != wanted or handle not in levels(hub)
    if changed:
        marker = frontmatter.render(
            {
                "agent": handle,
                "notify": wanted,
                "subscribed": naming.iso_now(hub.clock.now(), "milliseconds"),
                "via": "bucket",
            },
            "",
        )
        hub.write_central([(path, marker)])
        hub.audit.record(
            agent_id=handle,
            route="/v1/leaderboard/subscribe",
            via="bucket",
            source=source,
            target_path=path,
            size=len(marker),
            status_code=200,
            caller_ip=caller_info.ip,
            user_agent=caller_info.user_agent,
        )
    return {"handle": handle, "notify": wanted, "changed": changed, "path": path}
