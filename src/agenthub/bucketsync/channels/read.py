"""Reading channels (seed §12): the list, a channel's detail, its messages and one of them,
the feed over a handle's subscriptions and the digest block — all from the one `channels/`
listing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from agenthub.bucketsync.channels.write import (
    Channel,
    channels_index,
    load_records,
    notify_level,
    require_channel,
    subscriptions,
)
from agenthub.bucketsync.core import listing, naming
from agenthub.bucketsync.core.access import require_handle
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.readmodel import Record
from agenthub.bucketsync.core.records import render_record
from agenthub.bucketsync.errors import InvalidQuery, NotFound

THEME_EXCERPT = 200
RECENT_IN_DETAIL = 5


def _render(record: Record) -> dict[str, Any]:
    return render_record(record)


def _summary(channel: Channel, readme: Record | None) -> dict[str, Any]:
    fm = readme.frontmatter if readme is not None else {}
    newest = max(channel.messages) if channel.messages else None
    created = fm.get("created")
    return {
        "name": channel.name,
        "creator": fm.get("creator"),
        "created": created,
        "theme_excerpt": " ".join((readme.body if readme else "").split())[:THEME_EXCERPT],
        "member_count": len(channel.members),
        "message_count": len(channel.messages),
        "last_activity": naming.stamp_to_iso(newest[: naming.STAMP_LEN]) if newest else created,
    }


def summaries(hub: Hub) -> list[dict[str, Any]]:
    """Every channel, most recently active first."""
    index = channels_index(hub)
    readmes = load_records(hub, [c.readme for c in index.values()])
    items = [_summary(c, readmes.get(c.readme)) for c in index.values()]
    items.sort(key=lambda item: (str(item["last_activity"] or ""), item["name"]), reverse=True)
    return items


def list_channels(hub: Hub, params: Mapping[str, str]) -> dict[str, Any]:
    items = summaries(hub)
    count = len(items)
    q = (params.get("q") or "").strip().lower()
    if q:
        items = [i for i in items if q in i["name"] or q in i["theme_excerpt"].lower()]
    matched = len(items)
    raw_limit = params.get("limit")
    if raw_limit:
        try:
            limit = int(raw_limit)
        except ValueError:
            raise InvalidQuery(f"limit={raw_limit!r} is not an integer") from None
        if limit < 1:
            raise InvalidQuery("limit must be at least 1", hint="use limit=10")
        items = items[:limit]
    return {"count": count, "matched": matched, "items": items}


def detail(hub: Hub, name: str) -> dict[str, Any]:
    channel = require_channel(hub, name)
    recent = sorted(channel.messages, reverse=True)[:RECENT_IN_DETAIL]
    loaded = load_records(
        hub,
        [channel.readme, *channel.members.values(), *(channel.messages[f] for f in recent)],
    )
    readme = loaded.get(channel.readme)
    fm = readme.frontmatter if readme is not None else {}
    members = []
    for handle in sorted(channel.members):
        marker_record = loaded.get(channel.members[handle])
        marker_fm = marker_record.frontmatter if marker_record is not None else {}
        members.append(
            {
                "handle": handle,
                "subscribed": marker_fm.get("subscribed"),
                "via": marker_fm.get("via"),
                "notify": notify_level(marker_record),
            }
        )
    return {
        "name": name,
        "creator": fm.get("creator"),
        "created": fm.get("created"),
        "updated": fm.get("updated"),
        "theme": _render(readme) if readme is not None else None,
        "members": members,
        "member_count": len(members),
        "message_count": len(channel.messages),
        "recent_messages": [
            _render(loaded[channel.messages[f]]) for f in recent if channel.messages[f] in loaded
        ],
    }


def _query(hub: Hub, params: Mapping[str, str]) -> listing.ListQuery:
    return listing.parse_query(
        params, expand_max=hub.settings.expand_max_limit, cursor=listing.is_filename_cursor
    )


def channel_messages(hub: Hub, name: str, params: Mapping[str, str]) -> dict[str, Any]:
    channel = require_channel(hub, name)
    keys = channel.filenames
    listed = listing.Listed(keys=keys, paths=dict(channel.messages), count=len(keys))
    return listing.page(
        listed,
        _query(hub, params),
        load=lambda paths: load_records(hub, list(paths)),
        render=lambda _key, record: _render(record),
    )


def channel_message(hub: Hub, name: str, filename: str) -> dict[str, Any]:
    """`GET /v1/channels/{name}/messages/{filename}`: one post, whole."""
    path = require_channel(hub, name).messages.get(filename)
    record = load_records(hub, [path]).get(path) if path is not None else None
    if record is None:
        raise NotFound(
            f"no message {filename!r} in channel {name!r}",
            hint=f"list them with GET /v1/channels/{name}/messages",
        )
    return _render(record)


# `~` is unreserved in a URL, so a cursor carrying it needs no escaping (a `#` would start
# a fragment and be dropped by curl and every HTTP client).
FEED_KEY_SEP = "~"


def feed_listed(hub: Hub, names: list[str]) -> listing.Listed:
    """The union of `names`' messages keyed `{filename}~{channel}` (two channels may hold
    the same filename), so keys sort by (filename, path)."""
    index = channels_index(hub)
    paths: dict[str, str] = {}
    for name in names:
        channel = index.get(name)
        if channel is None:
            continue
        for filename, path in channel.messages.items():
            paths[f"{filename}{FEED_KEY_SEP}{name}"] = path
    return listing.Listed(keys=sorted(paths), paths=paths, count=len(paths))


def is_feed_cursor(value: str) -> bool:
    """A feed cursor: a filename, or `{filename}~{channel}` (a page boundary between two
    channels' copies of one filename)."""
    filename, sep, channel = value.partition(FEED_KEY_SEP)
    return listing.is_filename_cursor(filename) and (
        not sep or bool(naming.AGENT_ID_RE.match(channel))
    )


def feed_params(params: Mapping[str, str]) -> dict[str, str]:
    """A bare filename cursor is exclusive of every channel's copy of that filename (a
    cursor of neither form is 400 INVALID_QUERY, before it is widened)."""
    adjusted = dict(params)
    for name in ("after", "before"):
        value = adjusted.get(name)
        listing.check_cursor(name, value or None, is_feed_cursor)
        if value and FEED_KEY_SEP not in value:
            adjusted[name] = value + (FEED_KEY_SEP + "\U0010ffff" if name == "after" else "")
    return adjusted


def feed(hub: Hub, handle: str, params: Mapping[str, str]) -> dict[str, Any]:
    """The feed over `handle`'s subscriptions, as agent-collabs serves it: records keyed by
    path inside (the same filename minted in two channels is listed twice), items, `next`
    and `cursor` the plain `{stamp}_{agent}.md` filename. Only where a plain cursor would
    skip an undelivered copy of the same filename (a page boundary between two channels'
    copies) does it stay `{filename}~{channel}`, which `after`/`before` accept too."""
    bound = hub.stamps.watermark()  # before the listing: see `core.stamps`
    require_handle(hub, handle)
    listed = feed_listed(hub, list(subscriptions(hub, handle)))
    delivered: list[str] = []

    def render(key: str, record: Record) -> dict[str, Any]:
        delivered.append(key)
        return _render(record)

    page = listing.page(
        listed,
        listing.parse_query(feed_params(params), expand_max=hub.settings.expand_max_limit),
        load=lambda paths: load_records(hub, list(paths)),
        render=render,
        bound=bound,
    )
    if listing.held_back(page, listed, hub.stamps.catch_up):
        return feed(hub, handle, params)  # once: the floor is past every listed key
    if not delivered:
        delivered = [item for item in page["items"] if isinstance(item, str)]
        page["items"] = [_plain(key) for key in delivered]
    copies = Counter(_plain(key) for key in listed.keys)
    last_copy = {_plain(key): key for key in listed.keys}  # keys are sorted
    shown = Counter(_plain(key) for key in delivered)
    cursor, following = page["cursor"], page["next"]
    # `after=<filename>` passes every copy of it: plain once the newest copy is in hand.
    if cursor is not None and last_copy.get(_plain(cursor)) == cursor:
        page["cursor"] = _plain(cursor)
    # `next` may be used as `after` or `before`: plain only when no copy is left behind.
    if following is not None and copies[_plain(following)] == shown[_plain(following)]:
        page["next"] = _plain(following)
    return page


def _plain(key: str) -> str:
    return key.partition(FEED_KEY_SEP)[0]


def digest_block(hub: Hub, as_handle: str | None, since: str | None) -> dict[str, Any]:
    """Digest `channels`: every summary, plus (with `as=`) fresh activity per subscription."""
    items = summaries(hub)
    block: dict[str, Any] = {"count": len(items), "channels": items}
    if as_handle is None:
        return block
    held = hub.stamps.watermark()  # before the index: nothing counted since can come later
    index = channels_index(hub)
    bound = naming.normalize_time_bound(since, name="since") if since else None
    subscribed = []
    for name, level in subscriptions(hub, as_handle).items():
        filenames = index[name].filenames
        fresh = [
            f
            for f in filenames
            if (bound is None or f[: naming.STAMP_LEN] >= bound)
            and (f < held or naming.parse_stamped_filename(f) is None)
        ]
        recent = fresh[::-1][: hub.settings.digest_channel_recent]
        loaded = load_records(hub, [index[name].messages[f] for f in recent])
        subscribed.append(
            {
                "name": name,
                "new_count": len(fresh),
                "notify": level,
                "recent": [
                    _render(loaded[index[name].messages[f]])
                    for f in recent
                    if index[name].messages[f] in loaded
                ],
            }
        )
    block["subscribed"] = subscribed
    return block
