"""Channels (seed §12): themed rooms at `channels/{name}/` — a README (the channel exists iff
it does), one member marker per subscriber, and stamped messages.

Everything read here derives from ONE recursive `channels/` listing (no roster file);
posting lives in `messages.py` (`channel` on `POST /v1/messages`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agenthub.bucketsync import frontmatter, listing, naming
from agenthub.bucketsync.agents import bearer_caller, require_registered
from agenthub.bucketsync.context import CallerInfo, Hub
from agenthub.bucketsync.errors import (
    BodyOrSourceRequired,
    ChannelExists,
    ChannelNotFound,
    IdentityMismatch,
    InvalidFrontmatter,
    InvalidPath,
    InvalidQuery,
    InvalidRequest,
    NotOrganizer,
    SourceNotFound,
    Unauthorized,
)
from agenthub.bucketsync.readmodel import Record
from agenthub.bucketsync.storage import Batch, FileEntry

CHANNELS = "channels/"
RESERVED = frozenset({"feed"})
NOTIFY_LEVELS = ("mentions", "all")
NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")
THEME_EXCERPT = 200
RECENT_IN_DETAIL = 5


@dataclass(frozen=True)
class Channel:
    name: str
    readme: str
    members: Mapping[str, str]  # handle -> marker path
    messages: Mapping[str, str]  # filename -> path

    @property
    def filenames(self) -> list[str]:
        return sorted(self.messages)


def validate_name(name: str) -> str:
    if not NAME_RE.match(name):
        lowered = name.lower()
        hint = (
            f"channel names are lowercase: use {lowered!r}"
            if NAME_RE.match(lowered)
            else "1-40 of a-z, 0-9 and inner hyphens, e.g. 'ideas'"
        )
        raise InvalidPath(f"{name!r} is not a valid channel name", hint=hint)
    if name in RESERVED:
        raise InvalidPath(f"channel name {name!r} is reserved", hint="pick another name")
    return name


def _index(entries: dict[str, FileEntry]) -> dict[str, Channel]:
    readmes: dict[str, str] = {}
    members: dict[str, dict[str, str]] = {}
    messages: dict[str, dict[str, str]] = {}
    for path in entries:
        parts = path[len(CHANNELS) :].split("/")
        if len(parts) == 2 and parts[1] == "README.md":
            readmes[parts[0]] = path
        elif len(parts) == 2 and naming.parse_stamped_filename(parts[1]) is not None:
            messages.setdefault(parts[0], {})[parts[1]] = path
        elif len(parts) == 3 and parts[1] == "members" and parts[2].endswith(".md"):
            members.setdefault(parts[0], {})[parts[2][: -len(".md")]] = path
    return {
        name: Channel(name, readme, members.get(name, {}), messages.get(name, {}))
        for name, readme in readmes.items()
    }


def channels_index(hub: Hub) -> dict[str, Channel]:
    return hub.read_model.derived(CHANNELS, "channels", _index)


def require_channel(hub: Hub, name: str) -> Channel:
    validate_name(name)
    channel = channels_index(hub).get(name)
    if channel is None:
        raise ChannelNotFound(
            f"there is no channel {name!r}",
            hint="list channels with GET /v1/channels; organizers create them",
        )
    return channel


def is_member(hub: Hub, name: str, handle: str) -> bool:
    channel = channels_index(hub).get(name)
    return channel is not None and handle in channel.members


def notify_level(record: Record | None) -> str:
    """`notify: all` on the marker; absent or unknown reads as `mentions` (BS-13.21)."""
    if record is not None and record.frontmatter.get("notify") == "all":
        return "all"
    return "mentions"


def _now_iso(hub: Hub) -> str:
    return hub.clock.now().isoformat(timespec="milliseconds").replace("+00:00", "Z")


def marker(hub: Hub, name: str, handle: str, *, via: str, notify: str | None) -> tuple[str, bytes]:
    fm: dict[str, Any] = {
        "channel": name,
        "agent": handle,
        "subscribed": _now_iso(hub),
        "via": via,
    }
    if notify is not None:
        fm["notify"] = notify
    return naming.channel_member_path(name, handle), frontmatter.render(fm, "")


def _records(hub: Hub, paths: list[str]) -> dict[str, Record]:
    return hub.read_model.records(paths, CHANNELS) if paths else {}


def subscriptions(hub: Hub, handle: str) -> dict[str, str]:
    """The channels `handle` follows, with the notify level of each."""
    mine = {c.name: c.members[handle] for c in channels_index(hub).values() if handle in c.members}
    loaded = _records(hub, list(mine.values()))
    return {name: notify_level(loaded.get(path)) for name, path in sorted(mine.items())}


def require_handle(hub: Hub, handle: str) -> str:
    """A handle a read may watch: `human-*` or a registered agent (checked before parking)."""
    naming.validate_handle(handle)
    if not naming.is_human_handle(handle):
        require_registered(hub, handle)
    return handle


# -- writes -------------------------------------------------------------------------------
def _human_caller(hub: Hub, handle: str, authorization: str | None) -> tuple[str, str | None]:
    caller = bearer_caller(hub, authorization)
    if caller.user.lower() != handle.removeprefix("human-"):
        raise IdentityMismatch(
            f"{handle!r} does not match the token's user {caller.user!r}",
            hint=f"act as human-{caller.user.lower()}",
        )
    return caller.user, caller.email


def create(
    hub: Hub,
    *,
    name: str,
    agent_id: str | None,
    body: str | None,
    source: str | None,
    authorization: str | None,
    caller_info: CallerInfo,
) -> tuple[int, dict[str, Any]]:
    """Create a channel (201) or update its theme as the creator (200)."""
    from agenthub.bucketsync.messages import require_organizer

    validate_name(name)
    if source is not None or agent_id is None or not naming.is_human_handle(agent_id):
        raise NotOrganizer(
            "only organizers create channels, as human-<name> with their Bearer token",
            hint="propose the channel on the board instead",
        )
    user, email = _human_caller(hub, agent_id, authorization)
    if body is None or not body.strip():
        raise InvalidRequest(
            "the channel theme (body) is empty", hint="describe what the channel is for"
        )
    require_organizer(hub, user, email)
    hub.limiters.raw_messages.acquire(agent_id)
    readme_path = naming.channel_readme_path(name)
    existing = hub.read_model.record(readme_path, CHANNELS)
    now = _now_iso(hub)
    if existing is not None:
        creator = str(existing.frontmatter.get("creator", ""))
        if creator != agent_id:
            raise ChannelExists(
                f"channel {name!r} exists and was created by {creator}",
                hint=f"only {creator} can update its theme; pick another name",
            )
        fm = {**existing.frontmatter, "updated": now, "via": "dashboard"}
        data = frontmatter.render(fm, body)
        hub.write_central([(readme_path, data)])
        _audit(hub, agent_id, "/v1/channels", readme_path, len(data), 200, caller_info, name)
        return 200, {
            "name": name,
            "via": "dashboard",
            "path": readme_path,
            "created": False,
            "announcement": None,
        }
    readme = frontmatter.render(
        {"channel": name, "creator": agent_id, "created": now, "via": "dashboard"}, body
    )
    stamp_value = hub.stamps.issue(agent_id)
    announcement = naming.message_filename(stamp_value, agent_id)
    excerpt = " ".join(body.split())[:THEME_EXCERPT]
    board = frontmatter.render(
        {
            "agent": agent_id,
            "timestamp": naming.stamp_to_iso(stamp_value),
            "via": "server",
            "type": "note",
        },
        f"New channel #{name}: {excerpt}\n\n"
        f"Read it: GET /v1/channels/{name} (messages: GET /v1/channels/{name}/messages).\n"
        f'Post: POST /v1/messages with "channel": "{name}" (posting subscribes you).\n'
        f"Follow: POST /v1/channels/{name}/subscribe with your source "
        '(add "notify": "all" to be woken by every post).\n',
    )
    board_path = f"{naming.MESSAGE_BOARD}{announcement}"
    # The README makes the channel exist and the announcement makes it visible: both last.
    hub.write_central(
        [
            marker(hub, name, agent_id, via="create", notify=None),
            (readme_path, readme),
            (board_path, board),
        ]
    )
    _audit(hub, agent_id, "/v1/channels", readme_path, len(readme), 201, caller_info, name)
    return 201, {
        "name": name,
        "via": "dashboard",
        "path": readme_path,
        "created": True,
        "announcement": announcement,
    }


def _audit(
    hub: Hub,
    agent_id: str,
    route: str,
    target: str,
    size: int,
    status: int,
    caller_info: CallerInfo,
    channel: str,
    source: str | None = None,
) -> None:
    hub.audit.record(
        agent_id=agent_id,
        route=route,
        via="bucket" if source else "dashboard",
        source=source,
        target_path=target,
        size=size,
        status_code=status,
        channel=channel,
        caller_ip=caller_info.ip,
        user_agent=caller_info.user_agent,
    )


def _subscriber(
    hub: Hub, source: str | None, agent_id: str | None, authorization: str | None
) -> str:
    """Subscriptions are durable state: agents prove bucket control with an existing
    source file; a bare agent_id is honoured only for `human-<name>` + Bearer."""
    if source is not None:
        ref = hub.parse_source(source)
        require_registered(hub, ref.agent_id)
        hub.limiters.source_writes.acquire(ref.bucket)
        if hub.store.read(ref.bucket, ref.path) is None:
            raise SourceNotFound(
                f"{source} does not exist",
                hint=f"upload any small file there first: hf buckets cp <file> {source}",
            )
        return ref.agent_id
    if agent_id is None:
        raise BodyOrSourceRequired(
            "send {source} (agents) or {agent_id: human-<name>} with a Bearer token",
            hint='{"source": "hf://buckets/ORG/SLUG-you/anything.md"}',
        )
    if not naming.is_human_handle(agent_id):
        raise Unauthorized(
            "agents subscribe with {source}: a file in their own scratch bucket",
            hint='{"source": "hf://buckets/ORG/SLUG-you/anything.md"}',
        )
    _human_caller(hub, agent_id, authorization)
    return agent_id


def subscribe(
    hub: Hub,
    name: str,
    *,
    source: str | None,
    agent_id: str | None,
    notify: str | None,
    authorization: str | None,
    caller_info: CallerInfo,
) -> dict[str, Any]:
    channel = require_channel(hub, name)
    if notify is not None and notify not in NOTIFY_LEVELS:
        raise InvalidFrontmatter(
            f"notify={notify!r} is not a level", hint="use notify: all or notify: mentions"
        )
    handle = _subscriber(hub, source, agent_id, authorization)
    path = naming.channel_member_path(name, handle)
    existing = hub.read_model.record(path, CHANNELS) if handle in channel.members else None
    if existing is not None:
        current = notify_level(existing)
        if notify is None or notify == current:
            return _membership(name, handle, subscribed=True, changed=False, notify=current)
        # A pure level change patches the marker and keeps `subscribed`.
        data = frontmatter.render({**existing.frontmatter, "notify": notify}, existing.body)
        hub.write_central([(path, data)])
    else:
        path, data = marker(hub, name, handle, via="subscribe", notify=notify)
        hub.write_central([(path, data)])
    _audit(
        hub,
        handle,
        f"/v1/channels/{name}/subscribe",
        path,
        len(data),
        200,
        caller_info,
        name,
        source,
    )
    level = notify or (notify_level(existing) if existing is not None else "mentions")
    return _membership(name, handle, subscribed=True, changed=True, notify=level)


def unsubscribe(
    hub: Hub,
    name: str,
    *,
    source: str | None,
    agent_id: str | None,
    authorization: str | None,
    caller_info: CallerInfo,
) -> dict[str, Any]:
    channel = require_channel(hub, name)
    handle = _subscriber(hub, source, agent_id, authorization)
    if handle not in channel.members:
        return _membership(name, handle, subscribed=False, changed=False, notify=None)
    path = naming.channel_member_path(name, handle)
    # The system's only deleting write; the member's posts stay (BS-12.24).
    hub.store.write_batch(hub.central, Batch(deletes=[path]))
    hub.read_model.delete_through(CHANNELS, path)
    hub.announce_folders({CHANNELS})
    _audit(hub, handle, f"/v1/channels/{name}/unsubscribe", path, 0, 200, caller_info, name, source)
    return _membership(name, handle, subscribed=False, changed=True, notify=None)


def _membership(
    name: str, handle: str, *, subscribed: bool, changed: bool, notify: str | None
) -> dict[str, Any]:
    return {
        "channel": name,
        "handle": handle,
        "subscribed": subscribed,
        "changed": changed,
        "notify": notify,
    }


# -- reads --------------------------------------------------------------------------------
def _render(record: Record) -> dict[str, Any]:
    from agenthub.bucketsync.board import render_record

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
    readmes = _records(hub, [c.readme for c in index.values()])
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
    loaded = _records(
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
    return listing.parse_query(params, expand_max=hub.settings.expand_max_limit)


def channel_messages(hub: Hub, name: str, params: Mapping[str, str]) -> dict[str, Any]:
    channel = require_channel(hub, name)
    keys = channel.filenames
    listed = listing.Listed(keys=keys, paths=dict(channel.messages), count=len(keys))
    return listing.page(
        listed,
        _query(hub, params),
        load=lambda paths: _records(hub, list(paths)),
        render=lambda _key, record: _render(record),
    )


FEED_KEY_SEP = "#"


def feed_listed(hub: Hub, names: list[str]) -> listing.Listed:
    """The union of `names`' messages keyed `{filename}#{channel}` (two channels may hold
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


def feed_params(params: Mapping[str, str]) -> dict[str, str]:
    """A bare filename cursor is exclusive of every channel's copy of that filename."""
    adjusted = dict(params)
    for name in ("after", "before"):
        value = adjusted.get(name)
        if value and FEED_KEY_SEP not in value:
            adjusted[name] = value + (FEED_KEY_SEP + "\U0010ffff" if name == "after" else "")
    return adjusted


def feed(hub: Hub, handle: str, params: Mapping[str, str]) -> dict[str, Any]:
    require_handle(hub, handle)
    listed = feed_listed(hub, list(subscriptions(hub, handle)))
    return listing.page(
        listed,
        _query(hub, feed_params(params)),
        load=lambda paths: _records(hub, list(paths)),
        render=lambda _key, record: _render(record),
    )


def digest_block(hub: Hub, as_handle: str | None, since: str | None) -> dict[str, Any]:
    """Digest `channels`: every summary, plus (with `as=`) fresh activity per subscription."""
    items = summaries(hub)
    block: dict[str, Any] = {"count": len(items), "channels": items}
    if as_handle is None:
        return block
    index = channels_index(hub)
    bound = naming.normalize_time_bound(since, name="since") if since else None
    subscribed = []
    for name, level in subscriptions(hub, as_handle).items():
        filenames = index[name].filenames
        fresh = [f for f in filenames if bound is None or f[: naming.STAMP_LEN] >= bound]
        recent = fresh[::-1][: hub.settings.digest_channel_recent]
        loaded = _records(hub, [index[name].messages[f] for f in recent])
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
