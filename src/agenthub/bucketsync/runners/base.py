"""The `JobRunner` port: launch a harness container with bucket prefixes mounted, then
inspect, read logs of, and cancel it.

Adapters: `local.LocalJobRunner` (a subprocess in a sandbox directory tree holding
copies of the mounted prefixes; the default) and `hf.HfJobRunner` (HF Jobs with bucket
`Volume`s). Adapters raise `JobLaunchError` when a launch fails and `JobRunnerUnavailable`
when the platform cannot be asked; nothing else escapes them. A failed job's `JobState`
carries a `reason` from `FAILURE_REASONS`, the taxonomy every failure is reported with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

# HF Jobs' JobStage values; the first four are terminal.
COMPLETED, CANCELED, ERROR, DELETED = "COMPLETED", "CANCELED", "ERROR", "DELETED"
SCHEDULING, RUNNING = "SCHEDULING", "RUNNING"
TERMINAL_STAGES = frozenset({COMPLETED, CANCELED, ERROR, DELETED})

# Why a run (or a verification) failed. Only `platform_error` is the platform's fault: it is
# not charged to the quota and is retried (JOB_PLATFORM_RETRIES); the rest are the
# submission's or the harness's. The first five come from runners, the last three from the
# verifier.
HARNESS_ERROR, TIMEOUT, OOM = "harness_error", "timeout", "oom"
SUBMISSION_MISSING, PLATFORM_ERROR = "submission_missing", "platform_error"
SUBMISSION_CHANGED, SCORE_MISMATCH, GUARD_EXCEEDED = (
    "submission_changed",
    "score_mismatch",
    "guard_exceeded",
)
FAILURE_REASONS = {
    HARNESS_ERROR: "the harness exited with an error (see job_logs.txt)",
    TIMEOUT: "the run went past JOB_TIMEOUT_MINUTES and was stopped",
    OOM: "the run was killed for using too much memory",
    SUBMISSION_MISSING: "the submission folder is missing or empty",
    PLATFORM_ERROR: "the platform failed (launch failure, the platform killed the run, lost "
    "logs): not charged to your quota, retried automatically",
    SUBMISSION_CHANGED: "a pinned submission file changed or vanished after the result was "
    "promoted",
    SCORE_MISMATCH: "the re-run score is outside VERIFIER_SCORE_TOL of the reported one",
    GUARD_EXCEEDED: "the re-run guard value is above VERIFIER_GUARD_CAP",
}


class JobLaunchError(Exception):
    """The platform did not start the job."""


class JobRunnerUnavailable(Exception):
    """The platform could not be asked about a job (transient)."""


@dataclass(frozen=True)
class Mount:
    """A bucket prefix mounted into the container at `mount_path`."""

    bucket: str
    prefix: str  # "" = the whole bucket; otherwise a folder path ending in "/"
    mount_path: str
    read_only: bool


@dataclass(frozen=True)
class JobSpec:
    command: tuple[str, ...]
    mounts: tuple[Mount, ...]
    image: str
    flavor: str
    timeout_s: int
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LaunchedJob:
    job_id: str
    url: str


@dataclass(frozen=True)
class JobState:
    stage: str
    message: str | None = None
    reason: str | None = None  # a FAILURE_REASONS key when the job failed

    @property
    def terminal(self) -> bool:
        return self.stage in TERMINAL_STAGES


class JobRunner(Protocol):
    def launch(self, spec: JobSpec) -> LaunchedJob:
        """Start the job; raise `JobLaunchError` if it could not be started."""
        ...

    def inspect(self, job_id: str) -> JobState:
        """The job's current stage."""
        ...

    def logs(self, job_id: str) -> str:
        """The job's output so far (stdout and stderr)."""
        ...

    def cancel(self, job_id: str) -> None:
        """Stop the job (idempotent)."""
        ...
