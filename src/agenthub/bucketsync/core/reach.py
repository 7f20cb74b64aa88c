"""The reach forecast of a post (issue 18, item 3): for each handle a message was delivered
to, did a live watcher get it now, will it see it at its next poll, or is nobody watching?

- `woken`: a waiter of the handle was parked (in this worker, or in another one per the
  shared `PresenceMap`) on one of the post's wake keys when the wake landed;
- `next_poll`: the handle long-polled within `fresh_s` but had no such parked waiter — a
  waiter still *checking* at the instant of the wake counts here: the registry's latch
  makes sure it is not lost, but its current answer may be the page it read before the
  write, so the forecast does not promise "now";
- `unreachable`: no long-poll within `fresh_s` (or never).

`PresenceMap` is the port the long-poll registry reports presence and parked waiters to,
so other workers can see them; `NoPresenceMap` is the one-worker adapter (the local
registry is all there is), `scaleout.presence.RedisPresence` the shared one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Reach:
    woken: tuple[str, ...] = ()
    next_poll: tuple[str, ...] = ()
    unreachable: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, list[str]]:
        return {
            "woken": list(self.woken),
            "next_poll": list(self.next_poll),
            "unreachable": list(self.unreachable),
        }


@dataclass(frozen=True)
class Sighting:
    """What the other workers know of one handle: its newest long-poll (epoch seconds) and
    the wake keys of each waiter parked there now."""

    seen_at: float | None = None
    parked: tuple[frozenset[str], ...] = ()


class PresenceMap(Protocol):
    """Presence stamps and parked waiters shared between workers. Writers never block the
    caller (they run on the event loop); `sightings` is one round trip for any number of
    handles and answers `{}` rather than raising when the shared store is down."""

    def seen(self, handle: str, at: float) -> None: ...

    def parked(self, owner: str, waiter: int, keys: frozenset[str], until: float) -> None: ...

    def unparked(self, owner: str, waiter: int) -> None: ...

    def sightings(self, handles: Sequence[str], now: float) -> dict[str, Sighting]: ...

    def stats(self) -> dict[str, int] | None:
        """Counters for `/v1/healthz` (None: nothing is shared)."""
        ...

    def close(self) -> None:
        """Send what is queued and stop (the app's shutdown)."""
        ...


class NoPresenceMap:
    """One worker: nothing to share, nothing to look up."""

    def seen(self, handle: str, at: float) -> None:
        return None

    def parked(self, owner: str, waiter: int, keys: frozenset[str], until: float) -> None:
        return None

    def unparked(self, owner: str, waiter: int) -> None:
        return None

    def sightings(self, handles: Sequence[str], now: float) -> dict[str, Sighting]:
        return {}

    def stats(self) -> dict[str, int] | None:
        return None

    def close(self) -> None:
        return None
