"""The `reach` of a board post (`core.reach` defines the three states): who it was
delivered to, and whether each of them is watching.

"Delivered to" is what `/v1/updates` will hand each handle:
- a mention or a refs reply: the inbox recipients (`mentions_delivered`);
- a broadcast: every registered agent but the author;
- a channel post: its recipients, then the members whose notify level is `all` (members
  at `mentions` can read it in the channel but it does not wake them, so it is not theirs).

Computed after the wake, from the registry's answer to it (parked waiters here) and ONE
lookup in the shared `PresenceMap` (other workers), O(recipients): the read model's
listings and member markers, no bucket read of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from agenthub.bucketsync.channels import write as channels
from agenthub.bucketsync.core.access import registered_agents
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.longpoll import WAKE_ALL
from agenthub.bucketsync.core.reach import Reach


def audience(
    hub: Hub, *, author: str, broadcast: bool, channel: str | None, recipients: Sequence[str]
) -> list[str]:
    """The handles a post is delivered to, in the order the answer lists them."""
    if broadcast:
        return [handle for handle in registered_agents(hub) if handle != author]
    handles = list(recipients)
    if channel is not None:
        room = channels.channels_index(hub).get(channel)
        members = {} if room is None else room.members
        markers = channels.load_records(hub, list(members.values()))
        handles += [
            handle
            for handle, path in sorted(members.items())
            if handle != author
            and handle not in handles
            and channels.notify_level(markers.get(path)) == "all"
        ]
    return handles


def forecast(
    hub: Hub, handles: Sequence[str], keys: Sequence[str], woken_here: frozenset[str]
) -> Reach:
    """Sort `handles` into woken / next_poll / unreachable. `woken_here` is what this
    process's registry answered to the post's wake (owners it found parked)."""
    longpoll = hub.longpoll
    if not handles:
        return Reach()
    if longpoll is None:  # offline (a CLI pass): nobody parks here
        return Reach(unreachable=tuple(handles))
    registry = longpoll.registry
    fresh_s = hub.settings.watch_fresh_s
    now = hub.clock.now().timestamp()
    elsewhere = registry.presence_map.sightings(handles, now)
    seen_here = registry.seen_within(handles, fresh_s)
    wake = frozenset(keys)
    woken: list[str] = []
    next_poll: list[str] = []
    unreachable: list[str] = []
    for handle in handles:
        sighting = elsewhere.get(handle)
        parked_elsewhere = sighting is not None and any(
            WAKE_ALL in wake or parked & wake for parked in sighting.parked
        )
        if handle in woken_here or parked_elsewhere:
            woken.append(handle)
        elif handle in seen_here or (
            sighting is not None
            and sighting.seen_at is not None
            and now - sighting.seen_at <= fresh_s
        ):
            next_poll.append(handle)
        else:
            unreachable.append(handle)
    return Reach(tuple(woken), tuple(next_poll), tuple(unreachable))
