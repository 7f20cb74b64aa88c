"""Job minutes per agent, from the jobs ledger: what each agent's benchmark runs cost the
platform, as the leaderboard's Pareto view reports it.

A run's minutes are its `job_status.json` span (`launched_at` → `finished_at`). The ledger
holds the quota's window (the last 24h), so these are the minutes of the runs it still
lists. An agent with no run listed ran none in that window: 0 minutes, known. A listed run
that is still going, or whose status file is missing or unreadable, makes the agent's
minutes unknown (None), never a floor; so does a ledger that cannot be read.

A finished run's span never changes, so it is read once per process (`FinishedSpans`):
a Pareto read then costs one ledger read plus the status files of runs still going.
"""

from __future__ import annotations

import logging
import threading

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.perreadmodel import PerReadModel
from agenthub.bucketsync.errors import QuotaBackendUnavailable, StorageUnavailable
from agenthub.bucketsync.scoring.quota import LedgerRow, QuotaLedger
from agenthub.bucketsync.scoring.runs import read_status

log = logging.getLogger(__name__)


def _span_minutes(launched: object, finished: object) -> float | None:
    start, end = naming.parse_moment(launched), naming.parse_moment(finished)
    if start is None or end is None or end < start:
        return None
    return (end - start).total_seconds() / 60.0


RunKey = tuple[str, str, str]  # (status bucket, run prefix, job id)


class FinishedSpans:
    """The minutes of finished runs, kept for the runs the ledger still lists."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._minutes: dict[RunKey, float] = {}

    def minutes(self, hub: Hub, row: LedgerRow) -> float | None:
        key = (row.status_bucket, row.run_prefix, row.job_id)
        with self._lock:
            known = self._minutes.get(key)
        if known is not None:
            return known
        try:
            status = read_status(hub, row.status_bucket, row.run_prefix) if row.run_prefix else None
        except StorageUnavailable:
            return None
        if status is None or status.get("job_id") != row.job_id:
            return None
        span = _span_minutes(status.get("launched_at"), status.get("finished_at"))
        if span is not None:
            with self._lock:
                self._minutes[key] = span
        return span

    def keep_only(self, rows: list[LedgerRow]) -> None:
        listed = {(r.status_bucket, r.run_prefix, r.job_id) for r in rows}
        with self._lock:
            self._minutes = {k: v for k, v in self._minutes.items() if k in listed}


_SPANS = PerReadModel(FinishedSpans)


def agent_minutes(hub: Hub) -> dict[str, float | None] | None:
    """agent_id → job minutes over the runs the ledger lists (an agent absent from it has 0
    known minutes), or None when nobody's minutes are known (jobs off, ledger unreadable)."""
    s = hub.settings
    if not s.jobs_enabled:
        return None
    try:
        rows = QuotaLedger(hub.store, s.audit_bucket, s.job_quota_ledger_path).rows()
    except QuotaBackendUnavailable as exc:
        log.warning("job minutes unknown: %s", exc.message)
        return None
    spans = _SPANS.of(hub.read_model)
    spans.keep_only(rows)
    minutes: dict[str, float | None] = {}
    for row in rows:
        known = minutes.get(row.agent_id, 0.0)
        span = spans.minutes(hub, row)
        minutes[row.agent_id] = None if span is None or known is None else known + span
    return minutes
