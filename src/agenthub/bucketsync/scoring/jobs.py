"""Benchmark jobs: `POST /v1/jobs:run` (per-call proof, quota, harness contract) and the
in-process watcher that enforces the timeout and writes `job_logs.txt` + `job_status.json`
into the run prefix when a job ends.

The harness contract (seed §4): the challenge's `{HARNESS_PREFIX}` in the central bucket is
mounted ro at /harness, the submission ro at /submission, a rw /state, and (verifier runs
only) the private eval set ro at /private; the command is
`python3 /harness/run.py --submission-dir /submission --state-dir /state
[--private-dir /private] {JOB_EXTRA_ARGS...}`. The harness writes `/state/summary.json`.
"""

from __future__ import annotations

import json
import logging
import shlex
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.access import bearer_caller, require_registered
from agenthub.bucketsync.core.clihints import bucket_cli
from agenthub.bucketsync.core.hub import CallerInfo, Hub
from agenthub.bucketsync.errors import (
    BucketNotOwnedByCaller,
    IdentityMismatch,
    InvalidPath,
    JobLaunchFailed,
    SourceNotFound,
    StorageUnavailable,
)
from agenthub.bucketsync.runners.base import (
    CANCELED,
    JobLaunchError,
    JobRunner,
    JobRunnerUnavailable,
    JobSpec,
    JobState,
    LaunchedJob,
    Mount,
)
from agenthub.bucketsync.scoring.quota import JobQuota
from agenthub.bucketsync.storage.base import Batch, read_json_object

log = logging.getLogger(__name__)

STATUS_FILE = "job_status.json"
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

    def status(self, state: JobState | None, finished_at: str | None) -> dict[str, Any]:
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
            **self.extra,
        }


@dataclass(frozen=True)
class Outcome:
    record: RunRecord
    state: JobState


def _folder(prefix: str, *, name: str) -> str:
    """A validated bucket folder prefix ending in '/'."""
    folder = prefix.rstrip("/") if isinstance(prefix, str) else ""
    if not folder:
        raise InvalidPath(f"{name} is empty", hint=f"{name}: e.g. 'runs/run-1/'")
    naming.validate_components(folder)
    return folder + "/"


class JobsService:
    def __init__(self, hub: Hub, runner: JobRunner, quota: JobQuota) -> None:
        self.hub = hub
        self.runner = runner
        self.quota = quota
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.watching = 0
        self.finished = 0

    # -- the harness contract ---------------------------------------------------------------
    def spec(self, mounts: list[Mount], *, private: bool, labels: dict[str, str]) -> JobSpec:
        s = self.hub.settings
        command = [
            "python3",
            f"/harness/{s.job_harness_entrypoint}",
            "--submission-dir",
            "/submission",
            "--state-dir",
            "/state",
        ]
        if private:
            command += ["--private-dir", "/private"]
        command += shlex.split(s.job_extra_args)
        harness = Mount(s.central_bucket, s.harness_prefix, "/harness", read_only=True)
        return JobSpec(
            command=tuple(command),
            mounts=(harness, *mounts),
            image=s.job_image,
            flavor=s.job_flavor,
            timeout_s=s.job_timeout_s,
            labels=labels,
        )

    def check_harness(self) -> None:
        s = self.hub.settings
        entry = f"{s.harness_prefix}{s.job_harness_entrypoint}"
        if self.hub.store.read(s.central_bucket, entry) is None:
            raise JobLaunchFailed(
                f"the challenge harness {s.central_bucket}/{entry} is missing",
                hint="the organizer uploads the harness directory to HARNESS_PREFIX",
            )

    # -- POST /v1/jobs:run ------------------------------------------------------------------
    def run_for_agent(
        self,
        *,
        authorization: str | None,
        agent_id: str,
        submission_prefix: str,
        run_prefix: str,
        caller_info: CallerInfo,
    ) -> dict[str, Any]:
        hub = self.hub
        caller = bearer_caller(hub, authorization)
        naming.validate_agent_id(agent_id)
        bucket = hub.check_agent_bucket(agent_id)
        submission = _folder(submission_prefix, name="submission_prefix")
        run = _folder(run_prefix, name="run_prefix")
        record = require_registered(hub, agent_id)
        handshake = hub.store.read(bucket, naming.HANDSHAKE_FILE)
        if handshake is None or handshake.decode("utf-8", "replace").strip() != caller.user:
            raise BucketNotOwnedByCaller(
                f"the handshake in {bucket} does not name the caller {caller.user!r}",
                hint=f"upload {naming.HANDSHAKE_FILE} containing exactly your username",
            )
        if record.frontmatter.get("hf_user") != caller.user:
            raise IdentityMismatch(
                f"agent {agent_id!r} is registered to another user",
                hint="launch jobs for your own agents",
            )
        if not hub.store.list(bucket, submission):
            uri = f"hf://buckets/{bucket}/{submission}"
            raise SourceNotFound(
                f"{uri} has no files",
                hint=f"{bucket_cli(hub.settings.storage)} sync <local dir> {uri}",
            )
        self.check_harness()
        spec = self.spec(
            [
                Mount(bucket, submission, "/submission", read_only=True),
                Mount(bucket, run, "/state", read_only=False),
            ],
            private=False,
            labels={"collab": hub.settings.collab_slug, "agent": agent_id, "kind": "agent"},
        )
        launched_at = hub.clock.now().isoformat(timespec="milliseconds").replace("+00:00", "Z")
        pending = RunRecord(
            job_id="",
            job_url="",
            kind="agent",
            agent_id=agent_id,
            submission_bucket=bucket,
            submission_prefix=submission,
            status_bucket=bucket,
            run_prefix=run,
            launched_at=launched_at,
            timeout_s=spec.timeout_s,
        )

        def start() -> tuple[str, LaunchedJob]:
            # A mounted prefix must exist and be non-empty (HF fails the job otherwise); the
            # first job_status.json is that placeholder and already names the submission.
            self._write_status(pending, None, None)
            job = self._launch(spec)
            return job.job_id, job

        job, remaining = self.quota.launch(
            agent_id, caller.user, start, status_bucket=bucket, run_prefix=run
        )
        run_record = RunRecord(**{**pending.__dict__, "job_id": job.job_id, "job_url": job.url})
        self._write_status(run_record, None, None)
        self.watch(run_record)
        hub.audit.record(
            agent_id=agent_id,
            route="/v1/jobs:run",
            via="bearer",
            source=f"hf://buckets/{bucket}/{submission}",
            target_path=f"hf://buckets/{bucket}/{run}",
            size=0,
            status_code=202,
            job_id=job.job_id,
            hf_user=caller.user,
            caller_ip=caller_info.ip,
            user_agent=caller_info.user_agent,
        )
        minutes = hub.settings.job_timeout_minutes
        return {
            "job_id": job.job_id,
            "job_url": job.url,
            "status_file": f"hf://buckets/{bucket}/{run}{STATUS_FILE}",
            "logs_file": f"hf://buckets/{bucket}/{run}{LOGS_FILE}",
            "summary_file": f"hf://buckets/{bucket}/{run}{SUMMARY_FILE}",
            "quota": {
                "agent_remaining": remaining.agent,
                "user_remaining": remaining.user,
                "per_agent_per_day": self.quota.per_agent,
                "per_user_per_day": self.quota.per_user,
            },
            "timeout_minutes": minutes,
            "message": (
                f"job {job.job_id} launched; when it ends (at most {minutes:g} min) "
                f"{STATUS_FILE} and {LOGS_FILE} appear in hf://buckets/{bucket}/{run}"
            ),
        }

    def _launch(self, spec: JobSpec) -> LaunchedJob:
        try:
            return self.runner.launch(spec)
        except JobLaunchError as exc:
            raise JobLaunchFailed(
                f"the job platform did not start the job: {exc}",
                hint="retry later; the launch was not counted against your quota",
            ) from exc

    def launch_run(self, record: RunRecord, spec: JobSpec) -> RunRecord:
        """Launch a run outside any quota (the verifier's): placeholder, launch, status."""
        self._write_status(record, None, None)
        job = self._launch(spec)
        launched = RunRecord(**{**record.__dict__, "job_id": job.job_id, "job_url": job.url})
        self._write_status(launched, None, None)
        return launched

    # -- the watcher ------------------------------------------------------------------------
    def watch(
        self, record: RunRecord, on_done: Callable[[Outcome], None] | None = None
    ) -> threading.Thread:
        thread = threading.Thread(
            target=self._watch, args=(record, on_done), name=f"job-{record.job_id}", daemon=True
        )
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            self.watching += 1
        thread.start()
        return thread

    def _watch(self, record: RunRecord, on_done: Callable[[Outcome], None] | None) -> None:
        clock = self.hub.clock
        deadline = clock.monotonic() + record.timeout_s + self.hub.settings.job_cancel_grace_s
        try:
            while True:
                if self._stop.is_set():
                    return  # shutting down: `verify reconcile` finishes the run later
                try:
                    state = self.runner.inspect(record.job_id)
                except JobRunnerUnavailable as exc:
                    log.warning("could not inspect %s: %s", record.job_id, exc)
                    state = None
                if state is not None and state.terminal:
                    break
                if clock.monotonic() >= deadline:
                    try:
                        self.runner.cancel(record.job_id)
                    except JobRunnerUnavailable as exc:
                        log.error("could not cancel %s: %s", record.job_id, exc)
                    state = JobState(
                        CANCELED,
                        f"cancelled by the watcher: ran past JOB_TIMEOUT_MINUTES "
                        f"({record.timeout_s}s) plus {self.hub.settings.job_cancel_grace_s:g}s",
                    )
                    break
                self._stop.wait(self.hub.settings.job_poll_s)
            outcome = self.finish(record, state)
            if on_done is not None:
                on_done(outcome)
        except Exception:
            log.exception("watcher of %s failed", record.job_id)
        finally:
            with self._lock:
                self.watching -= 1

    def finish(self, record: RunRecord, state: JobState) -> Outcome:
        """Write `job_logs.txt` + `job_status.json` for an ended run (idempotent)."""
        try:
            logs = self.runner.logs(record.job_id)
        except JobRunnerUnavailable as exc:
            logs = f"[logs unavailable: {exc}]\n"
        finished_at = self.hub.clock.now().isoformat(timespec="milliseconds")
        self.hub.store.write_batch(
            record.status_bucket,
            Batch(
                adds=[
                    (f"{record.run_prefix}{LOGS_FILE}", logs.encode("utf-8")),
                    (
                        f"{record.run_prefix}{STATUS_FILE}",
                        json.dumps(
                            record.status(state, finished_at.replace("+00:00", "Z")), indent=2
                        ).encode(),
                    ),
                ]
            ),
        )
        with self._lock:
            self.finished += 1
        return Outcome(record, state)

    def _write_status(
        self, record: RunRecord, state: JobState | None, finished_at: str | None
    ) -> None:
        try:
            self.hub.store.write_batch(
                record.status_bucket,
                Batch(
                    adds=[
                        (
                            f"{record.run_prefix}{STATUS_FILE}",
                            json.dumps(record.status(state, finished_at), indent=2).encode(),
                        )
                    ]
                ),
            )
        except StorageUnavailable as exc:
            raise JobLaunchFailed(
                f"could not prepare {record.status_bucket}/{record.run_prefix}: {exc.message}",
                hint="retry in a minute; nothing was launched",
            ) from exc

    def reconcile_runs(self) -> tuple[int, int]:
        """Finish agent runs of the last 24h that ended while nobody watched (a restart):
        write their job_logs.txt + job_status.json. Returns (finished, still running)."""
        finished = running = 0
        for row in self.quota.ledger.rows():
            if not row.run_prefix:
                continue
            status = read_status(self.hub, row.status_bucket, row.run_prefix)
            if status is None or status.get("job_id") != row.job_id or status.get("finished_at"):
                continue
            try:
                state = self.runner.inspect(row.job_id)
            except JobRunnerUnavailable as exc:
                log.warning("could not inspect %s: %s", row.job_id, exc)
                continue
            if not state.terminal:
                running += 1
                continue
            self.finish(record_from_status(status), state)
            finished += 1
        return finished, running

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop watching (a restart): running jobs are left to `verify reconcile`."""
        self._stop.set()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout)


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
    )


_DERIVED = {"stage", "message", "submission", "summary_file", "finished_at"}
