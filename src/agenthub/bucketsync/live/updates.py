"""`GET /v1/updates?as=` (seed §13): one cursored stream of everything that may wake a
handle — its inbox (mentions, refs, broadcasts) + the messages of its `notify: all`
channels + overlapping claims + its landscape events (`leaderboard:overtaken`,
`champion:changed`, `verification:valid|invalid`; `landscape/`), deduped by filename and
labelled with `reasons` — plus the digest's presence and unread blocks.

One filename cursor covers the union: stamps are server-issued and per-author monotonic,
so filenames are globally unique and lexical order is chronological. The folders of the
union become visible at different moments, so a page stops at the watermark
(`core.stamps`): what sorts above it waits for the next page, never skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agenthub.bucketsync.board import read as board
from agenthub.bucketsync.channels import write as channels
from agenthub.bucketsync.claims import read as claimviews
from agenthub.bucketsync.core import listing, naming, records, stamps
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.readmodel import Record
from agenthub.bucketsync.directives import read as directiveviews
from agenthub.bucketsync.landscape import events as landscape_events
from agenthub.bucketsync.landscape import read as landscape


@dataclass(frozen=True)
class Stream:
    handle: str
    listed: listing.Listed
    reasons: Mapping[str, list[str]]
    loud_channels: list[str]
    loud_landscape: bool = False  # subscribed to the leaderboard at `notify: all`

    @property
    def keys(self) -> list[str]:
        """Wake keys: the inbox always (so never `no_streams`), each loud channel, and the
        handle's landscape events (every champion change at `notify: all`)."""
        landscape = [f"landscape:{self.handle}"]
        if self.loud_landscape:
            landscape.append("landscape:all")
        return [
            f"inbox:{self.handle}",
            *(f"channel:{name}" for name in self.loud_channels),
            *landscape,
        ]


def stream(hub: Hub, handle: str) -> Stream:
    inbox = board.inbox_listed(hub, handle)  # validates the handle, 404 if unregistered
    paths = dict(inbox.paths)
    reasons: dict[str, list[str]] = {
        key: ["broadcast" if path.startswith(naming.BROADCASTS) else "mention"]
        for key, path in paths.items()
    }
    loud = [name for name, level in channels.subscriptions(hub, handle).items() if level == "all"]
    index = channels.channels_index(hub)
    for name in loud:
        for filename, path in index[name].messages.items():
            # A channel post that also mentions you exists twice; deliver it once.
            paths.setdefault(filename, path)
            reasons.setdefault(filename, []).append(f"channel:{name}")
    for filename, path in claimviews.overlaps_for(hub, handle).items():
        paths.setdefault(filename, path)
        reasons.setdefault(filename, []).append("claim-overlap")
    events, loud_landscape = landscape.for_handle(hub, handle)
    for filename, path in landscape.paths_for(hub, events).items():
        paths.setdefault(filename, path)
        reasons.setdefault(filename, []).extend(events[filename])
    for filename in directiveviews.directives(hub).records:
        if filename in reasons:
            reasons[filename] = ["directive"]
    listed = listing.Listed(keys=sorted(paths), paths=paths, count=len(paths))
    return Stream(handle, listed, reasons, loud, loud_landscape)


def load(hub: Hub, paths: Sequence[str]) -> dict[str, Record]:
    """Records from whichever folders the union spans."""
    found: dict[str, Record] = {}
    for folder in (
        naming.INBOX,
        naming.BROADCASTS,
        channels.CHANNELS,
        naming.CLAIMS,
        landscape_events.EVENTS,
    ):
        wanted = [p for p in paths if p.startswith(folder)]
        if wanted:
            found.update(hub.read_model.records(wanted, folder))
    return found


def updates(hub: Hub, handle: str, params: Mapping[str, str]) -> dict[str, Any]:
    """One page of the union, served up to the watermark (read before every folder of
    it: an item is delivered only once all that can sort before it is visible)."""
    bound = hub.stamps.watermark()
    current = stream(hub, handle)  # 404 for an unknown handle before a bad query's 400
    query = listing.parse_query(
        params, expand_max=hub.settings.expand_max_limit, cursor=listing.is_filename_cursor
    )

    def render(key: str, record: Record) -> dict[str, Any]:
        shown = (
            landscape.render(hub, record, handle)
            if record.path.startswith(landscape_events.EVENTS)
            else records.render_record(record)
        )
        return {**shown, "reasons": list(current.reasons.get(key, []))}

    page = listing.page(
        current.listed, query, load=lambda paths: load(hub, paths), render=render, bound=bound
    )
    if listing.held_back(page, current.listed, hub.stamps.catch_up):
        return updates(hub, handle, params)  # once: the floor is past every listed key
    pinned = directiveviews.pin(page, directiveviews.pending_for(hub, handle), render)
    # `next` and `cursor` close the envelope, as on /v1/inbox and /v1/channels/feed: a
    # watcher reading the top-level cursor off the end of the answer finds it here too.
    tail = {name: pinned.pop(name) for name in ("next", "cursor")}
    return {**pinned, **tail}


def digest_blocks(
    hub: Hub, as_handle: str | None, after: str | None
) -> dict[str, dict[str, Any] | None]:
    """`watching` (is anyone long-polling for this handle?) and `updates` (am I behind?)."""
    if as_handle is None:
        return {"watching": None, "updates": None}
    held = hub.stamps.watermark()  # before the stream, as for a page
    current = stream(hub, as_handle)
    keys = stamps.visible(current.listed.keys, held)
    unread = [key for key in keys if after is None or key > after]
    presence = (
        hub.longpoll.registry.presence(as_handle, hub.settings.watch_fresh_s)
        if hub.longpoll is not None
        else None
    )
    return {
        "watching": presence,
        "updates": {
            "unread": len(unread),
            # Of those, the ones in your inbox (you were mentioned or referenced); the rest
            # are broadcasts and `notify: all` channel posts.
            "mentions": sum(1 for key in unread if "mention" in current.reasons.get(key, ())),
            "newest": keys[-1] if keys else None,
        },
    }
