"""One run of the harness as `job_status.json` describes it (`RunRecord`), and how it
ended (`Outcome`): enough to finish a run after a restart and to say why it failed.

`job_status.json` carries, besides where the run reads and writes, `queued_at`,
`started_at`, `attempt`, and once it ended `finished_at`, `reason` (a
`runners.base.FAILURE_REASONS` key, null on success) and `charged` (false for a
`platform_error`: such a run does not count against the quota).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.results.pins import STATUS_FILE
from agenthub.bucketsync.runners.base import COMPLETED, PLATFORM_ERROR, JobState
from agenthub.bucketsync.storage.base import read_json_object

__all__ = ["LOGS_FILE", "STATUS_FILE", "SUMMARY_FILE", "Outcome", "RunRecord"]

LOGS_FILE = "job_logs.txt"
SUMMARY_FILE = "summary.json"


@dataclass(frozen=True)
class RunRecord:
    """What `job_status.json` says about one run; enough to finish it after a restart."""

    job_id: str
    job_url: str
    kind: str  # "agent" | "verifier"
    agent_id: str
    submission_bucket: str
    submission_prefix: str
    status_bucket: str
    run_prefix: str
    launched_at: str
    timeout_s: int
    extra: dict[str, Any] = field(default_factory=dict)
    queued_at: str = ""  # when it was asked for (or queued, for a verification)
    started_at: str = ""  # when the platform accepted it
    attempt: int = 1  # > 1: relaunched after a platform_error

    def status(self, state: JobState | None, finished_at: str | None) -> dict[str, Any]:
        reason = failure_reason(state) if finished_at else None
        return {
            "job_id": self.job_id,
            "job_url": self.job_url,
            "kind": self.kind,
            "agent_id": self.agent_id,
            "stage": state.stage if state else ("RUNNING" if self.job_id else "SCHEDULING"),
            "message": state.message if state else None,
            "submission": f"hf://buckets/{self.submission_bucket}/{self.submission_prefix}",
            "submission_bucket": self.submission_bucket,
            "submission_prefix": self.submission_prefix,
            "status_bucket": self.status_bucket,
            "run_prefix": self.run_prefix,
            "summary_file": f"{self.run_prefix}{SUMMARY_FILE}",
            "launched_at": self.launched_at,
            "finished_at": finished_at,
            "timeout_s": self.timeout_s,
            "queued_at": self.queued_at or self.launched_at,
            "started_at": self.started_at or None,
            "attempt": self.attempt,
            "reason": reason,
            "charged": None if finished_at is None else reason != PLATFORM_ERROR,
            **self.extra,
        }


def failure_reason(state: JobState | None) -> str | None:
    """Why a finished run failed (None: it completed). A failure the runner could not
    explain is the platform's."""
    if state is None:
        return PLATFORM_ERROR
    if state.stage == COMPLETED:
        return state.reason  # completed, yet e.g. its logs were lost
    return state.reason or PLATFORM_ERROR


@dataclass(frozen=True)
class Outcome:
    record: RunRecord
    state: JobState


def read_status(hub: Hub, bucket: str, run_prefix: str) -> dict[str, Any] | None:
    """A run's `job_status.json`, or None if absent or unreadable."""
    return read_json_object(hub.store, bucket, f"{run_prefix}{STATUS_FILE}")


def record_from_status(status: dict[str, Any]) -> RunRecord:
    known = RunRecord.__dataclass_fields__
    extra = {k: v for k, v in status.items() if k not in known and k not in _DERIVED}
    return RunRecord(
        job_id=str(status["job_id"]),
        job_url=str(status.get("job_url", "")),
        kind=str(status.get("kind", "agent")),
        agent_id=str(status["agent_id"]),
        submission_bucket=str(status["submission_bucket"]),
        submission_prefix=str(status["submission_prefix"]),
        status_bucket=str(status.get("status_bucket") or status["submission_bucket"]),
        run_prefix=str(status["run_prefix"]),
        launched_at=str(status.get("launched_at", "")),
        timeout_s=int(status.get("timeout_s", 0)),
        extra=extra,
        queued_at=str(status.get("queued_at") or ""),
        started_at=str(status.get("started_at") or ""),
        attempt=int(status.get("attempt") or 1),
    )


_DERIVED = {"stage", "message", "submission", "summary_file", "finished_at", "reason", "charged"}
