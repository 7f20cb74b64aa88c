"""Channels (seed §12): themed rooms at `channels/{name}/` — a README (the channel exists iff
it does), one member marker per subscriber, and stamped messages.

Everything here derives from ONE recursive `channels/` listing (no roster file). Reads
are in `read.py`; posting is in `board/write.py` (`channel` on `POST /v1/messages`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agenthub.bucketsync.core import frontmatter, naming
from agenthub.bucketsync.core.access import bearer_caller, require_organizer
from agenthub.bucketsync.core.clihints import bucket_cli
from agenthub.bucketsync.core.hub import CallerInfo, Hub
from agenthub.bucketsync.core.readmodel import Record
from agenthub.bucketsync.core.records import stamp_record
from agenthub.bucketsync.core.sources import claim_source, read_source
from agenthub.bucketsync.errors import (
    BodyOrSourceRequired,
    ChannelExists,
    ChannelNotFound,
    IdentityMismatch,
    InvalidFrontmatter,
    InvalidPath,
    InvalidRequest,
    NotOrganizer,
    Unauthorized,
)
from agenthub.bucketsync.storage.base import Batch, FileChange, FileEntry

CHANNELS = "channels/"
RESERVED = frozenset({"feed"})
NOTIFY_LEVELS = ("mentions", "all")
THEME_EXCERPT = 200


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
    naming.validate_room_name(name, kind="channel", example="ideas")
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


def load_records(hub: Hub, paths: list[str]) -> dict[str, Record]:
    return hub.read_model.records(paths, CHANNELS) if paths else {}


def subscriptions(hub: Hub, handle: str) -> dict[str, str]:
    """The channels `handle` follows, with the notify level of each."""
    mine = {c.name: c.members[handle] for c in channels_index(hub).values() if handle in c.members}
    loaded = load_records(hub, list(mine.values()))
    return {name: notify_level(loaded.get(path)) for name, path in sorted(mine.items())}


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
    require_organizer(
        hub,
        user,
        email,
        action="create channels",
        hint="propose the channel on the board instead (POST /v1/messages); an organizer "
        "creates it",
    )
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
    excerpt = " ".join(body.split())[:THEME_EXCERPT]
    announcement, board = stamp_record(
        hub,
        agent_id,
        via="server",
        fields={"type": "note"},
        body=f"New channel #{name}: {excerpt}\n\n"
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
        ref = claim_source(hub, source)
        upload = f"{bucket_cli(hub.settings.storage)} cp <file> {source}"
        read_source(hub, ref, source, hint=f"upload any small file there first: {upload}")
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
    hub.announce_folders({CHANNELS}, [FileChange(path, deleted=True)])
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
