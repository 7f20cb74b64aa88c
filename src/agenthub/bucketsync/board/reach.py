"""The `reach` of a board post (`core.reach` defines the three states): who it was
delivered to, and whether each of them is watching.

"Delivered to" is what `/v1/updates` will hand each handle:
- a mention or a refs reply: the inbox recipients (`mentions_delivered`);
- a broadcast: every registered agent but the author;
- a channel post: its recipients, then the members whose notify level is `all` (members
  at `mentions` can read it in the channel but it does not wake them, so it is not theirs).

Computed around the wake (`wake`): the registry's answer to it (parked waiters here) and
ONE lookup in the shared `PresenceMap` just before it is published (other workers),
O(recipients): the read model's listings and member markers, no bucket read of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agenthub.bucketsync.channels import write as channels
from agenthub.bucketsync.core.access import registered_agents
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.reach import Reach, Sighting
from agenthub.bucketsync.core.waiters import WAKE_ALL


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


def wake(
    hub: Hub,
    *,
    author: str,
    broadcast: bool,
    channel: str | None,
    recipients: Sequence[str],
    keys: Sequence[str],
) -> Reach | None:
    """Wake the post's waiters and forecast its reach (None when `hub.reach_forecast` is
    off). Other workers are looked up just BEFORE the wake is published: once it is, their
    woken waiters leave the shared map within a millisecond. This worker's waiters are
    judged BY the wake, under the registry lock: a forecast taken earlier would count a
    waiter that left during the write."""
    if not hub.reach_forecast:
        if hub.notifier is not None:
            hub.notifier.wake(keys)
        return None
    handles = audience(
        hub, author=author, broadcast=broadcast, channel=channel, recipients=recipients
    )
    now = hub.clock.now().timestamp()
    registry = hub.longpoll.registry if hub.longpoll is not None else None
    elsewhere = registry.presence_map.sightings(handles, now) if registry is not None else {}
    woken_here = hub.notifier.wake(keys) if hub.notifier is not None else frozenset()
    return forecast(hub, handles, keys, woken_here, elsewhere)


def forecast(
    hub: Hub,
    handles: Sequence[str],
    keys: Sequence[str],
    woken_here: frozenset[str],
    elsewhere: Mapping[str, Sighting],
) -> Reach:
    """Sort `handles` into woken / next_poll / unreachable from what this process's
    registry answered to the wake (`woken_here`) and the other workers' `elsewhere`."""
    longpoll = hub.longpoll
    if not handles:
        return Reach()
    if longpoll is None:  # offline (a CLI pass): nobody parks here
        return Reach(unreachable=tuple(handles))
    fresh_s = hub.settings.watch_fresh_s
    now = hub.clock.now().timestamp()
    seen_here = longpoll.registry.seen_within(handles, fresh_s)
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
