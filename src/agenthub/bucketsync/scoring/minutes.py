"""Job minutes per agent, from the jobs ledger: what each agent's benchmark runs cost the
platform, as the leaderboard's Pareto view reports it.

A run's minutes are its `job_status.json` span (`launched_at` → `finished_at`). The ledger
holds the quota's window (the last 24h), so these are the minutes of the runs it still
lists. An agent with no run listed ran none in that window: 0 minutes, known. A listed run
that is still going, or whose status file is missing or unreadable, makes the agent's
minutes unknown (None), never a floor; so does a ledger that cannot be read.
"""

from __future__ import annotations

import logging

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.errors import QuotaBackendUnavailable, StorageUnavailable
from agenthub.bucketsync.scoring.jobs import read_status
from agenthub.bucketsync.scoring.quota import QuotaLedger

log = logging.getLogger(__name__)


def _span_minutes(launched: object, finished: object) -> float | None:
    start, end = naming.parse_moment(launched), naming.parse_moment(finished)
    if start is None or end is None or end < start:
        return None
    return (end - start).total_seconds() / 60.0


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
    minutes: dict[str, float | None] = {}
    for row in rows:
        known = minutes.get(row.agent_id, 0.0)
        try:
            status = read_status(hub, row.status_bucket, row.run_prefix) if row.run_prefix else None
        except StorageUnavailable:
            status = None
        span = None
        if status is not None and status.get("job_id") == row.job_id:
            span = _span_minutes(status.get("launched_at"), status.get("finished_at"))
        minutes[row.agent_id] = None if span is None or known is None else known + span
    return minutes
