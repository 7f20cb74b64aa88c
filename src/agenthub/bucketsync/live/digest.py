"""`GET /v1/digest`: one snapshot composed from every slice's reads."""

from __future__ import annotations

from typing import Any

from agenthub.bucketsync.agents.read import agent_info
from agenthub.bucketsync.board import read as board
from agenthub.bucketsync.channels import read as channelviews
from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.live import updates
from agenthub.bucketsync.results import leaderboard
from agenthub.bucketsync.results import write as results
from agenthub.bucketsync.traces import read as traces


def digest(
    hub: Hub, *, as_handle: str | None, since: str | None, after: str | None = None
) -> dict[str, Any]:
    """Agents, the top-10 leaderboard, recent messages and results, channels, presence,
    the one-line trace stats, and (with `as`) the handle's inbox."""
    params: dict[str, str] = {"expand": "true", "limit": "20"}
    if since:
        params["since"] = since
    agents_all = hub.read_model.entries(naming.AGENTS)
    agent_paths = [p for p in agents_all if p.endswith(".md")]
    records = hub.read_model.records(agent_paths, naming.AGENTS)
    infos = sorted(
        (agent_info(r) for r in records.values()),
        key=lambda info: (str(info.get("joined") or ""), info["agent_id"]),
        reverse=True,
    )
    inbox_block = None
    if as_handle is not None:
        page = board.inbox(hub, as_handle, {"expand": "true", "limit": "10"})
        inbox_block = {"count": page["count"], "items": page["items"]}
    messages = board.list_messages(hub, params)
    body = {
        "generated_at": hub.clock.now().isoformat(timespec="seconds").replace("+00:00", "Z"),
        "agents": {"count": len(infos), "newest": infos[:5]},
        "messages": {
            "count": messages["count"],
            "matched": messages["matched"],
            "items": messages["items"],
        },
        "leaderboard": leaderboard.leaderboard(hub, {"limit": "10"}),
        "results": _block(results.list_results(hub, {**params, "limit": "10"})),
        "inbox": inbox_block,
        **live_blocks(hub, as_handle, since, after),
    }
    stats_line = traces.digest_line(hub)
    if stats_line is not None:  # omitted until the first trace is shared
        body["stats"] = stats_line
    return body


def live_blocks(
    hub: Hub, as_handle: str | None, since: str | None, after: str | None
) -> dict[str, Any]:
    """The digest's channels, presence and unread blocks (seed §12-§13)."""
    return {
        "channels": channelviews.digest_block(hub, as_handle, since),
        **updates.digest_blocks(hub, as_handle, after),
    }


def _block(page: dict[str, Any]) -> dict[str, Any]:
    return {"count": page["count"], "matched": page["matched"], "items": page["items"]}
