"""The `Notifier` seam: the write path announces each committed write here.

The long-poll registry (seed §13) and the Redis bus plug in behind this Protocol; today the
in-process adapter records wake keys and calls any listeners, which is what the healthz
counters and tests observe.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Protocol


class Notifier(Protocol):
    def wake(self, keys: Iterable[str]) -> None:
        """Signal that something new exists for each key (e.g. `inbox:{handle}`)."""
        ...


class InProcessNotifier:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Callable[[frozenset[str]], None]] = []
        self.wakes = 0

    def subscribe(self, listener: Callable[[frozenset[str]], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def wake(self, keys: Iterable[str]) -> None:
        batch = frozenset(keys)
        if not batch:
            return
        with self._lock:
            self.wakes += 1
            listeners = list(self._listeners)
        for listener in listeners:
            listener(batch)
