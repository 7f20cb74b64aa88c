"""The `JobRunner` port: launch a harness container with bucket prefixes mounted, then
inspect, read logs of, and cancel it.

Adapters: `local.LocalJobRunner` (a subprocess in a sandbox directory tree holding
copies of the mounted prefixes; the default) and `hf.HfJobRunner` (HF Jobs with bucket
`Volume`s). Adapters raise `JobLaunchError` when a launch fails and `JobRunnerUnavailable`
when the platform cannot be asked; nothing else escapes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

# HF Jobs' JobStage values; the first four are terminal.
COMPLETED, CANCELED, ERROR, DELETED = "COMPLETED", "CANCELED", "ERROR", "DELETED"
SCHEDULING, RUNNING = "SCHEDULING", "RUNNING"
TERMINAL_STAGES = frozenset({COMPLETED, CANCELED, ERROR, DELETED})


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
