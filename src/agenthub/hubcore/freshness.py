"""How fresh the projection is, as readers and operators see it.

Lag = hub-core's clock - the last `source_time` a page or snapshot was applied
with. The read mode is `snapshot-pilot` for a one-time import nobody follows,
`live` while followed (by this server or a separate `agenthub hubcore
follow`) within `HUBCORE_MAX_LAG_S`, and `stale` beyond it or
after a refusal the follower has not yet recovered from: a stale source is
shown as stale, never served as fresh.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agenthub.clock import Clock
from agenthub.hubcore import repository as repo
from agenthub.hubcore.canonical import canonical_timestamp
from agenthub.hubcore.models import SourceCursor
from agenthub.hubcore.store import Database

SNAPSHOT_PILOT = "snapshot-pilot"
LIVE = "live"
STALE = "stale"


@dataclass(frozen=True)
class Freshness:
    """Where the rows came from, so a reader can judge how old they are."""

    mode: str
    source_instance: str | None
    source_time: datetime | None
    lag_seconds: float | None


def assess(
    cursor: SourceCursor | None, now: datetime, *, following: bool, max_lag_s: float
) -> Freshness:
    if cursor is None:
        return Freshness(STALE if following else SNAPSHOT_PILOT, None, None, None)
    lag = (now - cursor.last_source_time).total_seconds()
    if not following and cursor.mode == SNAPSHOT_PILOT:
        mode = SNAPSHOT_PILOT
    elif lag <= max_lag_s and cursor.last_error is None:
        # Followed here or by a separate `agenthub hubcore follow`: the cursor says so.
        mode = LIVE
    else:
        mode = STALE
    return Freshness(mode, cursor.source_instance, cursor.last_source_time, lag)


def health(
    cursor: SourceCursor | None, now: datetime, *, following: bool, max_lag_s: float
) -> dict[str, Any]:
    """What `/healthz` reports: cursor, high water, lag, mode and the last error."""
    fresh = assess(cursor, now, following=following, max_lag_s=max_lag_s)
    body: dict[str, Any] = {
        "status": "ok" if fresh.mode != STALE else "stale",
        "following": following,
        "mode": fresh.mode,
        "max_lag_s": max_lag_s,
        "lag_seconds": None if fresh.lag_seconds is None else round(fresh.lag_seconds, 3),
        "source_instance": None,
        "source_epoch": None,
        "cursor": None,
        "high_water": None,
        "source_time": None,
        "last_success_at": None,
        "last_error": None,
        "last_error_at": None,
    }
    if cursor is not None:
        body |= {
            "source_instance": cursor.source_instance,
            "source_epoch": cursor.source_epoch,
            "cursor": cursor.cursor,
            "high_water": cursor.high_water,
            "source_time": canonical_timestamp(cursor.last_source_time, "source_time"),
            "last_success_at": canonical_timestamp(cursor.last_success_at, "last_success_at"),
            "last_error": cursor.last_error,
            "last_error_at": None
            if cursor.last_error_at is None
            else canonical_timestamp(cursor.last_error_at, "last_error_at"),
        }
    return body


class FreshnessReport:
    """`/healthz`'s service: reads the cursor row and judges it."""

    def __init__(self, db: Database, clock: Clock, *, following: bool, max_lag_s: float) -> None:
        self.db = db
        self.clock = clock
        self.following = following
        self.max_lag_s = max_lag_s

    def health(self) -> dict[str, Any]:
        with self.db.read_only() as session:
            cursor = repo.latest_cursor(session)
            return health(
                cursor, self.clock.now(), following=self.following, max_lag_s=self.max_lag_s
            )
