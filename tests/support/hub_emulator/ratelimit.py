"""The Hub's rate limiter as an emulator policy: fixed 5-minute windows per token and per
bucket of requests (hub-docs `rate-limits.md`: "Hub APIs", "Resolvers", "Pages"; all
quotas over 5-minute fixed windows; a Team org has 3,000 API and 20,000 Resolver requests
per window). A request past its bucket's quota is answered 429 with `Retry-After` = the
seconds left in the window, without touching state, like the Hub.

    limiter = RateLimit(api=3000, resolve=20000)
    hub.add_policy(limiter)
    ...
    limiter.refused            # 429s answered, by kind
    limiter.windows("api")     # requests counted in each window, oldest first

`clock` (seconds, monotonic) is injectable so tests move through windows without sleeping.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Callable

from tests.support.hub_emulator.faults import Fault
from tests.support.hub_emulator.wire import HubRequest, Route

WINDOW_S = 300.0
# Documented per 5-minute window (hub-docs enterprise.md, "Core usage, storage, rate limits").
TEAM = {"api": 3000, "resolve": 20_000}


class RateLimit:
    """A `Policy` counting requests per (token, kind) in fixed windows."""

    def __init__(
        self,
        *,
        api: int | None = TEAM["api"],
        resolve: int | None = TEAM["resolve"],
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.quotas = {"api": api, "resolve": resolve}
        self.window_s = window_s
        self._clock = clock
        self._start = clock()
        self._lock = threading.Lock()
        # (window index, kind) -> requests counted (refused ones included, as the Hub does)
        self._used: Counter[tuple[int, str]] = Counter()
        self._per_token: Counter[tuple[int, str, str]] = Counter()
        self.refused: Counter[str] = Counter()

    def __call__(self, request: HubRequest, route: Route) -> Fault | None:
        quota = self.quotas.get(route.kind)
        elapsed = self._clock() - self._start
        window = int(elapsed // self.window_s)
        token = request.headers.get("authorization", "")
        with self._lock:
            self._used[(window, route.kind)] += 1
            self._per_token[(window, route.kind, token)] += 1
            over = quota is not None and self._per_token[(window, route.kind, token)] > quota
            if over:
                self.refused[route.kind] += 1
        if not over:
            return None
        left = (window + 1) * self.window_s - elapsed
        return Fault.rate_limited(retry_after=max(1, math.ceil(left)))

    def windows(self, kind: str = "api") -> list[int]:
        """Requests of `kind` counted in each window so far, oldest first."""
        with self._lock:
            last = max((w for w, _ in self._used), default=-1)
            return [self._used[(w, kind)] for w in range(last + 1)]

    def elapsed(self) -> float:
        return self._clock() - self._start
