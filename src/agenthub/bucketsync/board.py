"""Reading the board, inboxes and the digest — composed entirely from the read model."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agenthub.bucketsync import listing, naming
from agenthub.bucketsync.agents import agent_info, require_registered
from agenthub.bucketsync.context import Hub
from agenthub.bucketsync.errors import NotFound
from agenthub.bucketsync.readmodel import Record
from agenthub.bucketsync.storage import FileEntry


def render_record(record: Record) -> dict[str, Any]:
    parsed = naming.parse_stamped_filename(record.filename)
    return {
        "filename": record.filename,
        "path": record.path,
        "agent": parsed[1] if parsed else record.frontmatter.get("agent"),
        "timestamp": record.frontmatter.get("timestamp")
        or (naming.stamp_to_iso(parsed[0]) if parsed else None),
        "frontmatter": record.frontmatter,
        "body": record.body,
        "reasons": None,  # set only by /v1/updates
    }


def stamped_index(folder: str) -> Callable[[dict[str, FileEntry]], listing.Listed]:
    """Build the sorted `{stamp}_{agent}.md` keys of one flat folder from its listing."""

    def build(entries: dict[str, FileEntry]) -> listing.Listed:
        paths = {
            path[len(folder) :]: path
            for path in entries
            if "/" not in path[len(folder) :]
            and naming.parse_stamped_filename(path[len(folder) :]) is not None
        }
        return listing.Listed(keys=sorted(paths), paths=paths, count=len(paths))

    return build


def _inbox_index(entries: dict[str, FileEntry]) -> dict[str, dict[str, str]]:
    by_handle: dict[str, dict[str, str]] = {}
    for path in entries:
        rest = path[len(naming.INBOX) :]
        handle, _, filename = rest.partition("/")
        if "/" in filename or naming.parse_stamped_filename(filename) is None:
            continue
        by_handle.setdefault(handle, {})[filename] = path
    return by_handle


def _query(hub: Hub, params: Mapping[str, str]) -> listing.ListQuery:
    return listing.parse_query(params, expand_max=hub.settings.expand_max_limit)


def list_messages(hub: Hub, params: Mapping[str, str]) -> dict[str, Any]:
    query = _query(hub, params)
    listed = hub.read_model.derived(
        naming.MESSAGE_BOARD, "stamped", stamped_index(naming.MESSAGE_BOARD)
    )
    return listing.page(
        listed,
        query,
        load=lambda ps: hub.read_model.records(ps, naming.MESSAGE_BOARD),
        render=lambda _key, record: render_record(record),
        memo=hub.read_model.filter_memo(naming.MESSAGE_BOARD),
    )


def get_message(hub: Hub, filename: str) -> dict[str, Any]:
    record = None
    if naming.parse_stamped_filename(filename) is not None:
        record = hub.read_model.record(f"{naming.MESSAGE_BOARD}{filename}", naming.MESSAGE_BOARD)
    if record is None:
        raise NotFound(
            f"no message {filename!r} on the board", hint="list them with GET /v1/messages"
        )
    return render_record(record)


class _InboxLoader:
    """Loads inbox records from two folders: the handle's copies and the broadcasts."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    def __call__(self, paths: list[str] | Any) -> dict[str, Record]:
        inbox = [p for p in paths if p.startswith(naming.INBOX)]
        broadcasts = [p for p in paths if p.startswith(naming.BROADCASTS)]
        found = self.hub.read_model.records(inbox, naming.INBOX) if inbox else {}
        if broadcasts:
            found.update(self.hub.read_model.records(broadcasts, naming.BROADCASTS))
        return found


def inbox_listed(hub: Hub, handle: str) -> listing.Listed:
    """The handle's inbox copies plus every broadcast, deduped by filename (§11)."""
    naming.validate_handle(handle)
    if not naming.is_human_handle(handle):
        require_registered(hub, handle)
    copies = hub.read_model.derived(naming.INBOX, "by_handle", _inbox_index).get(handle, {})
    broadcasts = hub.read_model.derived(
        naming.BROADCASTS, "stamped", stamped_index(naming.BROADCASTS)
    )
    paths = dict(copies)
    for key in broadcasts.keys:
        paths.setdefault(key, broadcasts.paths[key])
    return listing.Listed(keys=sorted(paths), paths=paths, count=len(paths))


def inbox(hub: Hub, handle: str, params: Mapping[str, str]) -> dict[str, Any]:
    query = _query(hub, params)
    listed = inbox_listed(hub, handle)
    return listing.page(
        listed,
        query,
        load=_InboxLoader(hub),
        render=lambda _key, record: render_record(record),
    )


def digest(
    hub: Hub, *, as_handle: str | None, since: str | None, after: str | None = None
) -> dict[str, Any]:
    """Agents, the top-10 leaderboard, recent messages and results, channels, presence,
    the one-line trace stats, and (with `as`) the handle's inbox."""
    # results/leaderboard build on this module's record rendering, hence the late import.
    from agenthub.bucketsync import leaderboard, results, traces

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
        page = inbox(hub, as_handle, {"expand": "true", "limit": "10"})
        inbox_block = {"count": page["count"], "items": page["items"]}
    messages = list_messages(hub, params)
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
    from agenthub.bucketsync import channelviews, updates

    return {
        "channels": channelviews.digest_block(hub, as_handle, since),
        **updates.digest_blocks(hub, as_handle, after),
    }


def _block(page: dict[str, Any]) -> dict[str, Any]:
    return {"count": page["count"], "matched": page["matched"], "items": page["items"]}
