"""Per-author monotonic stamps: two promotions by one author in the same millisecond get
distinct `{stamp}_{agent}` filenames (the second is bumped 1 ms), so nothing overwrites."""

from __future__ import annotations

import threading
from collections.abc import Callable

from agenthub.bucketsync.core.naming import stamp_from_ms
from agenthub.clock import Clock


class StampIssuer:
    def __init__(
        self, clock: Clock, *, shared_claim: Callable[[str, str], bool] | None = None
    ) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._last_ms: dict[str, int] = {}
        # With several workers: claim (author, stamp) in a shared store; False = taken.
        self.shared_claim = shared_claim

    def issue(self, author: str, *, taken: Callable[[str], bool] = lambda _s: False) -> str:
        """A stamp for `author` later than any this process issued to them, skipping stamps
        `taken` reports as used (files written before a restart)."""
        with self._lock:
            now_ms = int(self._clock.now().timestamp() * 1000)
            candidate = max(now_ms, self._last_ms.get(author, -1) + 1)
            while taken(stamp_from_ms(candidate)) or (
                self.shared_claim is not None
                and not self.shared_claim(author, stamp_from_ms(candidate))
            ):
                candidate += 1
            self._last_ms[author] = candidate
            return stamp_from_ms(candidate)
