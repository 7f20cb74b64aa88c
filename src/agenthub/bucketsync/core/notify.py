"""The `Notifier` port: the write path announces each committed write here, after every
write-through (so a woken waiter's re-check sees the record it was woken for).

Two adapters: `InProcessNotifier` (default; one worker) and `scaleout.bus.RedisBus` (many
workers).
Listeners — the long-poll registry — subscribe to either. Wake keys are `inbox:{handle}`,
`channel:{name}`, or `waiters.WAKE_ALL` for a broadcast.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from agenthub.bucketsync.storage.base import FileChange

# A wake listener may answer with the handles whose parked waiters it woke (the registry
# does: the post's `reach.woken`); other listeners answer None.
Listener = Callable[[frozenset[str]], Iterable[str] | None]
# Told which read-model folders a write touched and, when known, every change it made to
# them (None: the folders must be listed again); the Redis bus tells the other workers.
FolderListener = Callable[[frozenset[str], list[FileChange] | None], None]


@dataclass(frozen=True)
class NotifierHealth:
    """What `/v1/healthz` shows of a notifier: the in-process wake count (one worker) or
    the bus counters (many workers)."""

    wakes: int | None = None
    bus: dict[str, int] | None = None
    # Why the bus cannot be reached right now (None: reachable, or no bus).
    error: str | None = None


class Notifier(Protocol):
    def wake(self, keys: Iterable[str]) -> frozenset[str]:
        """Signal that something new exists for each key (e.g. `inbox:{handle}`); returns
        the handles whose waiters were parked in THIS process (other workers' are looked
        up in the `PresenceMap`)."""
        ...

    def subscribe(self, listener: Listener) -> None:
        """Call `listener(keys)` for every wake (from any thread)."""
        ...

    def health(self) -> NotifierHealth:
        """Counters for `/v1/healthz`."""
        ...


class InProcessNotifier:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []
        self.wakes = 0

    def subscribe(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def health(self) -> NotifierHealth:
        return NotifierHealth(wakes=self.wakes)

    def wake(self, keys: Iterable[str]) -> frozenset[str]:
        batch = frozenset(keys)
        if not batch:
            return frozenset()
        with self._lock:
            self.wakes += 1
        return self.deliver(batch)

    def deliver(self, batch: frozenset[str]) -> frozenset[str]:
        """Hand `batch` to the listeners (uncounted: also used for other workers' wakes);
        returns the handles they report woken."""
        with self._lock:
            listeners = list(self._listeners)
        woken: set[str] = set()
        for listener in listeners:
            woken.update(listener(batch) or ())
        return frozenset(woken)


def wake_keys(*, broadcast: bool, recipients: Iterable[str], channel: str | None) -> list[str]:
    """Seed §13: broadcast → everyone; channel post → the channel + recipients' inboxes;
    mention → the inboxes; a board post with no recipients → nobody."""
    if broadcast:
        return ["*"]
    keys = [f"inbox:{handle}" for handle in recipients]
    if channel is not None:
        keys.append(f"channel:{channel}")
    return keys
