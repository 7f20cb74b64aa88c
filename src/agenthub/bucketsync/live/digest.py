"""`GET /v1/digest`: one snapshot composed from every slice's reads, and with
`budget_tokens` what matters since a cursor, packed into that many tokens (`live.budget`)."""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

from agenthub.bucketsync.agents.read import agent_info
from agenthub.bucketsync.board import read as board
from agenthub.bucketsync.channels import read as channelviews
from agenthub.bucketsync.claims import read as claimviews
from agenthub.bucketsync.core import naming, stamps
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.readmodel import Record
from agenthub.bucketsync.core.records import render_record, stamped_index
from agenthub.bucketsync.directives import read as directiveviews
from agenthub.bucketsync.live import budget, final, updates
from agenthub.bucketsync.phases import schedule
from agenthub.bucketsync.results import leaderboard, lineageview
from agenthub.bucketsync.results import write as results
from agenthub.bucketsync.taskforces import read as taskforces
from agenthub.bucketsync.traces import read as traces


def digest(
    hub: Hub, *, as_handle: str | None, since: str | None, after: str | None = None
) -> dict[str, Any]:
    """Agents, taskforces, the top-10 leaderboard, recent messages and results, channels, presence,
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
        "taskforces": taskforces.digest_block(hub),
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
        # Per agent, how often others built on their work (results/lineage.py).
        "lineage": lineageview.digest_block(hub),
        **live_blocks(hub, as_handle, since, after),
        **phase_blocks(hub),
    }


def phase_blocks(hub: Hub) -> dict[str, Any]:
    """`phase` (the schedule now) and, once the private split is revealed, the final
    leaderboard's top 10; nothing at all for a challenge without phases."""
    phase = schedule.describe(hub.settings, hub.clock.now())
    if phase is None:
        return {}
    board = final.final_board(hub)
    top = board["rows"][:10] if board["status"] == "revealed" else None
    return {"phase": phase, "final_leaderboard": top}


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


# The frontmatter a budgeted item carries; the rest of it is behind the item's `expand`.
CARRIED = ("type", "channel", "refs", "idea", "tags", "expires", "supersedes", "status")
# Records are read this many at a time, so the packer reads little past what it emits.
LOAD_CHUNK = 32

Entry = tuple[str, str]  # (stream or board key, path)


def budgeted(
    hub: Hub, *, as_handle: str | None, since: str | None, after: str | None, budget_tokens: int
) -> bytes:
    """`GET /v1/digest?budget_tokens=N`: the encoded body, at most N tokens. Items newer
    than the cursor `after` (and stamped at or after `since`) from the handle's
    `/v1/updates` stream, its unacked directives whatever the cursor, the live claims and
    the board, in `budget.SECTIONS` order, newest first within a section; then the
    `lineage` block, its credits packed by the same rule."""
    bound = naming.normalize_time_bound(since, name="since") if since else None
    # Read before every listing: the cursor this digest hands back never passes an item
    # that could still become visible below it (`core.stamps`); those come next time.
    held = hub.stamps.watermark()

    def is_new(key: str) -> bool:
        return (after is None or key > after) and (bound is None or key >= bound)

    def start(keys: Sequence[str]) -> int:
        """Where the new keys of a sorted list begin (filename order is time order)."""
        lo = bisect.bisect_right(keys, after) if after is not None else 0
        return max(lo, bisect.bisect_left(keys, bound)) if bound is not None else lo

    stream = updates.stream(hub, as_handle) if as_handle is not None else None
    every_stream_key = stream.listed.keys if stream is not None else []
    stream_keys = stamps.visible(every_stream_key, held)
    reasons = stream.reasons if stream is not None else {}
    paths: dict[str, str] = dict(stream.listed.paths) if stream is not None else {}
    chosen: dict[str, list[Entry]] = {name: [] for name in budget.NAMES}
    for key in reversed(stream_keys[start(stream_keys) :]):
        chosen[budget.section_of(reasons.get(key, ()))].append((key, paths[key]))

    if as_handle is not None:
        pending = directiveviews.pending_for(hub, as_handle)
    else:
        index = directiveviews.directives(hub)
        pending = [index.records[name] for name in index.active()]
    pinned = {record.filename for record in pending}
    # Pinned until acked, whatever the cursor; then the directives since it, acked or not.
    directive_entries = [(r.filename, r.path) for r in pending] + [
        entry for entry in chosen["directives"] if entry[0] not in pinned
    ]
    overlapping = {key for key, _path in chosen["claims"]}
    live = claimviews.live_claims(hub)
    claim_entries = chosen["claims"] + [
        (r.filename, r.path)
        for r in live
        if is_new(r.filename) and r.filename not in overlapping and r.filename < held
    ]

    listed = hub.read_model.derived(
        naming.MESSAGE_BOARD, "stamped", stamped_index(naming.MESSAGE_BOARD)
    )
    board_keys = stamps.visible(listed.keys, held)
    newest_listed = max((keys[-1] for keys in (every_stream_key, listed.keys) if keys), default="")
    if (
        len(stream_keys) < len(every_stream_key) or len(board_keys) < len(listed.keys)
    ) and hub.stamps.catch_up(newest_listed):
        # As a page does (`listing.held_back`): once, the floor now past every listed key.
        return budgeted(
            hub, as_handle=as_handle, since=since, after=after, budget_tokens=budget_tokens
        )
    first = start(board_keys)
    shown = set(paths) | pinned  # delivered in a section above, or older than the cursor
    board_new = (board_keys[i] for i in range(len(board_keys) - 1, first - 1, -1))
    rest_entries = heapq.merge(
        ((key, listed.paths[key]) for key in board_new if key not in shown),
        chosen["rest"],
        reverse=True,
    )
    # O(stream), not O(board): the new board keys less those shown above.
    rest_total = len(board_keys) - first + len(chosen["rest"])
    rest_total -= sum(1 for key in shown if key in listed.paths and is_new(key))

    def items(entries: Iterable[Entry]) -> Iterator[dict[str, Any]]:
        it = iter(entries)
        while chunk := list(islice(it, LOAD_CHUNK)):
            loaded = _load(hub, [path for _key, path in chunk])
            for key, path in chunk:
                if path in loaded:
                    record = loaded[path]
                    why = ["directive"] if key in pinned else list(reasons.get(key, ()))
                    item = _item(record, why, _expand(record, key, as_handle, stream_keys))
                    if as_handle is not None and directiveviews.is_directive(record):
                        item["acked"] = key not in pinned  # listed since the cursor, done
                    yield item

    sources = [
        budget.Source("directives", len(directive_entries), items(directive_entries)),
        *(
            budget.Source(name, len(chosen[name]), items(chosen[name]))
            for name in ("mentions", "broadcasts", "channels", "landscape")
        ),
        budget.Source("claims", len(claim_entries), items(claim_entries)),
        budget.Source("rest", rest_total, items(rest_entries)),
    ]
    live_keys = [r.filename for r in live if r.filename < held][:1]
    newest = max((keys[-1] for keys in (stream_keys, board_keys, live_keys) if keys), default=None)
    head = {
        "as": as_handle,
        "after": after,
        "since": since,
        "generated_at": naming.iso_now(hub.clock.now()),
        # Pass it back as after=: the next digest starts past everything this one saw.
        "cursor": newest,
    }
    # Below every section, as in the plain digest: who others build on.
    blocks = [budget.Block("lineage", lineageview.digest_block(hub), "credits")]
    return budget.pack(head, sources, budget_tokens, blocks)


def _load(hub: Hub, paths: Sequence[str]) -> dict[str, Record]:
    """Records of the stream's folders (`updates.load`) and of the board."""
    on_board = [p for p in paths if p.startswith(naming.MESSAGE_BOARD)]
    found = updates.load(hub, [p for p in paths if not p.startswith(naming.MESSAGE_BOARD)])
    if on_board:
        found.update(hub.read_model.records(on_board, naming.MESSAGE_BOARD))
    return found


def _item(record: Record, reasons: list[str], expand: str) -> dict[str, Any]:
    """A budgeted item: who, when, why, the carried frontmatter, the body (`budget` may cut
    it), where the whole item is, and the trust label every delivered item has."""
    full = render_record(record)
    fm = record.frontmatter
    return {
        "filename": full["filename"],
        "agent": full["agent"],
        "timestamp": full["timestamp"],
        "reasons": reasons,
        "fields": {key: fm[key] for key in CARRIED if key in fm},
        "body": record.body,
        "truncated": False,
        "expand": expand,
        "trust": full["trust"],
    }


def _expand(record: Record, key: str, as_handle: str | None, stream_keys: Sequence[str]) -> str:
    """The route serving `record` whole."""
    filename = record.filename
    channel = record.frontmatter.get("channel")
    if directiveviews.is_directive(record):
        return f"/v1/directives/{filename}"
    if record.path.startswith(naming.CLAIMS):
        return f"/v1/claims/{filename}"
    if record.path.startswith(naming.RESULTS):
        return f"/v1/results/{filename}"
    if isinstance(channel, str) and record.path.startswith(("channels/", naming.INBOX)):
        return f"/v1/channels/{channel}/messages/{filename}"
    if record.path.startswith((naming.MESSAGE_BOARD, naming.INBOX, naming.BROADCASTS)):
        return f"/v1/messages/{filename}"
    # A kind with no route of its own (a landscape event): the one-item /v1/updates page.
    before = bisect.bisect_left(stream_keys, key)
    after = f"&after={stream_keys[before - 1]}" if before > 0 else "&order=asc"
    return f"/v1/updates?as={as_handle}{after}&limit=1&expand=true"
