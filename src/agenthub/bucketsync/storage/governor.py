"""`HubGovernor`: the service token's Hub request budget, spent on writes first.

The Hub counts a token's API requests (paths under `/api/`) in fixed 5-minute windows and
answers 429 past the tier's limit (free 1,000, PRO 2,500, Team 3,000, Enterprise 6,000;
`settings.HUB_TIERS`). Resolver (`/resolve/`) and Xet storage requests have limits of
their own, far higher, and are not counted here. The governor counts every API request the
hf adapters send (`hubcalls.GuardedTransport` asks it before each one) in a moving window
of the same length, so no fixed window of the Hub's can see more than `limit` of them,
and refuses a request before the Hub would:

    priority (`storage.base.HUB_PRIORITY`)    sent while the window holds fewer than
    write  (writes, and what a write reads)    limit
    read   (a listing/record a GET lacks)      READ_SHARE * limit, else 503
    refresh (a TTL refresh of a listing)       REFRESH_SHARE * limit, else shed: the read
                                               model serves its listing a while longer

A refusal is `BudgetSpent`, which `HubCalls` turns into `StorageUnavailable` (503 with
`Retry-After`: when the window gives a request back). `limit` is the tier's minus a reserve
(`HUB_BUDGET_RESERVE`) for the token's other users. The window lives in `limits`' storage:
this process's memory, or Redis when a bus is configured, so every worker of a deployment
spends one budget; Redis unreachable fails closed, like the other shared limits.
"""

from __future__ import annotations

import hashlib
import math
import time
from typing import Any

from limits import RateLimitItemPerSecond
from limits.errors import StorageError
from limits.storage import Storage
from limits.strategies import MovingWindowRateLimiter

from agenthub.bucketsync.storage.base import HubPriority

# Reads stop short of the limit so writes always find room; refreshes stop first.
READ_SHARE = 0.9
REFRESH_SHARE = 0.75


class BudgetSpent(Exception):
    """The budget refuses this request (nothing was sent)."""

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def counted(path: str) -> bool:
    """Whether a request to `path` counts against the Hub's API limit (not resolvers, not
    Xet storage)."""
    return path.startswith("/api/")


class HubGovernor:
    """One token's budget: `limit` API requests per `window_s`, counted in `storage`."""

    def __init__(
        self,
        *,
        limit: int,
        window_s: float,
        storage: Storage,
        token: str | None,
        shared: bool = False,
    ) -> None:
        self.limit = limit
        self.window_s = window_s
        self.shared = shared  # `storage` is Redis, seen by every worker
        self._item = RateLimitItemPerSecond(limit, max(1, round(window_s)), namespace="hub-budget")
        self._limiter = MovingWindowRateLimiter(storage)
        # One window per token: deployments sharing a Redis and a token share the budget.
        self._key = hashlib.sha256((token or "").encode()).hexdigest()[:16]
        # Only this token's requests count (a caller's whoami spends the caller's budget).
        self.bearer = None if token is None else f"Bearer {token}"
        self.spent = 0  # by this process
        self.shed = 0
        self.refused = 0

    def ceiling(self, priority: HubPriority) -> int:
        share = {"write": 1.0, "read": READ_SHARE, "refresh": REFRESH_SHARE}[priority]
        return math.floor(self.limit * share)

    def standing(self) -> tuple[int, float]:
        """Requests in the window now, and seconds until it gives one back."""
        try:
            stats = self._limiter.get_window_stats(self._item, self._key)
        except StorageError as exc:
            raise self._unavailable(exc) from exc
        used = self.limit - stats.remaining
        return used, max(0.0, stats.reset_time - time.time()) if used else 0.0

    def admit(self, priority: HubPriority) -> None:
        """Refuse a call of `priority` the window has no room for (writes are refused only
        when a request finds the window full, in `spend`)."""
        if priority == "write":
            return
        used, wait = self.standing()
        if used >= self.ceiling(priority):
            self.refused += 1
            raise BudgetSpent(
                f"{used} of the {self.limit} Hub requests this token may spend per "
                f"{self.window_s:g} s are spent; {priority}s wait for writes",
                retry_after_s=max(1.0, wait),
            )

    def spend(self, path: str, priority: HubPriority, authorization: str | None) -> None:
        """Count one request to `path` about to be sent with `authorization`, or refuse
        it. A request made with another token is not this budget's."""
        if not counted(path) or (self.bearer is not None and authorization != self.bearer):
            return
        self.admit(priority)
        try:
            taken = self._limiter.hit(self._item, self._key)
        except StorageError as exc:
            raise self._unavailable(exc) from exc
        if not taken:
            self.refused += 1
            _used, wait = self.standing()
            raise BudgetSpent(
                f"the {self.limit} Hub requests this token may spend per {self.window_s:g} s "
                "are spent",
                retry_after_s=max(1.0, wait),
            )
        self.spent += 1

    def may_refresh(self) -> bool:
        used, _wait = self.standing()
        if used < self.ceiling("refresh"):
            return True
        self.shed += 1
        return False

    def report(self) -> dict[str, Any]:
        try:
            used, wait = self.standing()
        except BudgetSpent as exc:
            return {"limit": self.limit, "window_s": self.window_s, "error": str(exc)}
        return {
            "window_s": self.window_s,
            "used": used,
            "limit": self.limit,
            "frees_in_s": round(wait, 1),
            "shed": self.shed,
            "refused": self.refused,
            "spent_here": self.spent,
            "shared": self.shared,
        }

    def _unavailable(self, exc: Exception) -> BudgetSpent:
        return BudgetSpent(
            f"the shared Hub request budget (Redis) is unavailable: {exc}", retry_after_s=5.0
        )
