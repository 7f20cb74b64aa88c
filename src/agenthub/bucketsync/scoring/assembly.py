"""Assembling the scoring loop from settings and a JobRunner (chosen in `app/adapters.py`): the
quota lock and ledger, the jobs service and (when enabled) the verifier hooked onto result
promotion."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.runners.base import JobRunner
from agenthub.bucketsync.scoring.jobs import JobsService
from agenthub.bucketsync.scoring.queue import ScoringQueue
from agenthub.bucketsync.scoring.quota import (
    JobQuota,
    NamedQuotaLock,
    QuotaLedger,
    QuotaLock,
)
from agenthub.bucketsync.scoring.verifier import Verifier

log = logging.getLogger(__name__)


@dataclass
class Scoring:
    jobs: JobsService
    verifier: Verifier | None

    def start(self) -> None:
        """Start the verifier's loop (heartbeat and dispatch); the server does, at start-up."""
        if self.verifier is not None:
            self.verifier.start()

    def shutdown(self) -> None:
        if self.verifier is not None:
            self.verifier.stop()
        self.jobs.shutdown()


def default_quota_lock(hub: Hub) -> QuotaLock:
    """The hub's named `job-quota` lock: Redis once the bus shares state, else in-process."""
    return NamedQuotaLock(lambda: hub.locks)


def assemble_scoring(
    hub: Hub,
    runner: JobRunner,
    *,
    quota_lock: QuotaLock | None = None,
    listen: bool = True,
) -> Scoring:
    """The jobs service and verifier; `listen=False` (offline reconcile) does not hook the
    verifier onto result promotion."""
    s = hub.settings
    quota = JobQuota(
        QuotaLedger(hub.store, s.audit_bucket, s.job_quota_ledger_path),
        quota_lock or default_quota_lock(hub),
        hub.clock,
        per_agent=s.job_per_agent_per_day,
        per_user=s.job_per_user_per_day,
        swaps=hub.swaps,
    )
    queue = ScoringQueue(
        hub, concurrency=s.verifier_concurrency, heartbeat_s=s.verifier_heartbeat_s
    )
    jobs = JobsService(hub, runner, quota, queue)
    verifier = Verifier(hub, jobs) if s.verifier_enabled else None
    if verifier is not None and not s.audit_two_org:
        # Seed §8: participants can read a single-org audit bucket, eval set included.
        log.warning(
            "VERIFIER_ENABLED with a single-org AUDIT_BUCKET (%s): participants can read the "
            "private eval set under %s",
            s.audit_bucket,
            s.private_dataset_prefix,
        )
    if verifier is not None and listen:
        hub.result_listeners.append(verifier.consider_async)
    return Scoring(jobs=jobs, verifier=verifier)
