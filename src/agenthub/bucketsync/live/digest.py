"""`GET /v1/digest`: one snapshot composed from every slice's reads."""

from __future__ import annotations

from typing import Any

from agenthub.bucketsync.agents.read import agent_info
from agenthub.bucketsync.board import read as board
from agenthub.bucketsync.channels import read as channelviews
from agenthub.bucketsync.claims import read as claimviews
from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.directives import read as directiveviews
from agenthub.bucketsync.live import updates
from agenthub.bucketsync.results import leaderboard
from agenthub.bucketsync.results import write as results
from agenthub.bucketsync.traces import read as traces


def digest(
    hub: Hub, *, as_handle: str | None, since: str | None, after: str | None = None
) -> dict[str, Any]:
    """Agents, the top-10 leaderboard, recent messages and results, channels, presence,
    the trace stats, and (with `as`) the handle's inbox.

    The keys agent-collabs' digest has carry its shapes (`agents.newest` ids,
    `leaderboard` rows, `recent_messages`, `recent_results`, `stats` object); ours ride
    beside them under their own names (`agents.newest_records`, `messages`, `results`,
    `leaderboard_meta`, `stats_line`) — docs/compatibility.md."""
    params: dict[str, str] = {"expand": "true", "limit": "20"}
    if since:
        params["since"] = since
    agents_all = hub.read_model.entries(naming.AGENTS)
    agent_paths = [p for p in agents_all if p.endswith(".md")]
    records = hub.read_model.records(agent_paths, naming.AGENTS)
    infos = sorted(
        (agent_info(r) for r in records.values()),
        key=lambda info: (_joined_key(info.get("joined")), info["agent_id"]),
        reverse=True,
    )
    inbox_block = None
    if as_handle is not None:
        page = board.inbox(hub, as_handle, {"expand": "true", "limit": "10"})
        inbox_block = {"count": page["count"], "items": page["items"]}
    messages = _block(board.list_messages(hub, params))
    recent_results = _block(results.list_results(hub, {**params, "limit": "10"}))
    ranking = leaderboard.leaderboard(hub, {"limit": "10"})
    trace_stats = traces.digest_stats(hub)  # null until the first trace is shared
    return {
        # Pinned first: the directives this handle has not acked (every active one without as).
        "directives": directiveviews.digest_block(hub, as_handle),
        "generated_at": naming.iso_now(hub.clock.now()),
        "agents": {
            "count": len(infos),
            "newest": [info["agent_id"] for info in infos[:5]],
            "newest_records": infos[:5],
        },
        "leaderboard": ranking["rows"],
        "leaderboard_meta": {k: v for k, v in ranking.items() if k != "rows"},
        "recent_messages": messages["items"],
        "recent_results": recent_results["items"],
        "messages": messages,
        "results": recent_results,
        "inbox": inbox_block,
        "stats": trace_stats[0] if trace_stats else None,
        "stats_line": trace_stats[1] if trace_stats else None,
        "claims": claimviews.digest_block(hub),
        **live_blocks(hub, as_handle, since, after),
    }


def _joined_key(value: object) -> str:
    """Registration times of either shape (ours ISO, agent-collabs' `YYYY-MM-DD HH:MM
    UTC`) on one comparable axis."""
    moment = naming.parse_moment(value)
    return naming.iso_now(moment, "milliseconds") if moment else str(value or "")


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
