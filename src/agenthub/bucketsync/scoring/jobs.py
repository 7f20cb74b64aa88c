"""Benchmark jobs: `POST /v1/jobs:run` (per-call proof, quota, harness contract), watched
by `watcher.RunWatcher`, which enforces the timeout and writes `job_logs.txt` +
`job_status.json` into the run prefix when a job ends.

A run the platform failed (`platform_error`: it did not start, was killed by the platform,
or its logs were lost) is marked non-charging in the quota ledger, and an agent's run that
did not complete is relaunched up to `JOB_PLATFORM_RETRIES` times; every run is on the
scoring queue (`queue.py`) while it runs.

The harness contract (seed §4): the challenge's `{HARNESS_PREFIX}` in the central bucket is
mounted ro at /harness, the submission ro at /submission, a rw /state, and (verifier runs
only) the private eval set ro at /private; the command is
`python3 /harness/run.py --submission-dir /submission --state-dir /state
[--private-dir /private] {JOB_EXTRA_ARGS...}`. The harness writes `/state/summary.json`.
"""

from __future__ import annotations

import logging
import shlex
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
)
from agenthub.bucketsync.phases.schedule import job_cap
from agenthub.bucketsync.runners.base import (
    COMPLETED,
    PLATFORM_ERROR,
    JobLaunchError,
    JobRunner,
    JobRunnerUnavailable,
    JobSpec,
    LaunchedJob,
    Mount,
)
from agenthub.bucketsync.scoring.queue import AGENT, Entry, ScoringQueue
from agenthub.bucketsync.scoring.quota import JobQuota, LedgerRow
from agenthub.bucketsync.scoring.runs import (
    LOGS_FILE,
    STATUS_FILE,
    SUMMARY_FILE,
    Outcome,
    RunRecord,
    failure_reason,
    read_status,
    record_from_status,
)
from agenthub.bucketsync.scoring.watcher import RunWatcher

log = logging.getLogger(__name__)


def _folder(prefix: str, *, name: str) -> str:
    """A validated bucket folder prefix ending in '/'."""
    folder = prefix.rstrip("/") if isinstance(prefix, str) else ""
    if not folder:
        raise InvalidPath(f"{name} is empty", hint=f"{name}: e.g. 'runs/run-1/'")
    naming.validate_components(folder)
    return folder + "/"


class JobsService(RunWatcher):
    def __init__(self, hub: Hub, runner: JobRunner, quota: JobQuota, queue: ScoringQueue) -> None:
        super().__init__(hub, runner)
        self.quota = quota
        self.queue = queue
        self.retries = hub.settings.job_platform_retries

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
        cap = job_cap(hub.settings, hub.clock.now())  # the phase's rule: 409 PHASE_CLOSED
        self.check_harness()
        spec = self.agent_spec(agent_id, bucket, submission, run)
        launched_at = self._now()
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
            queued_at=launched_at,
            extra={"hf_user": caller.user},
        )

        def start() -> tuple[str, LaunchedJob]:
            # A mounted prefix must exist and be non-empty (HF fails the job otherwise); the
            # first job_status.json is that placeholder and already names the submission.
            self._write_status(pending, None, None)
            job = self._launch(spec)
            return job.job_id, job

        job, remaining = self.quota.launch(
            agent_id, caller.user, start, status_bucket=bucket, run_prefix=run, agent_cap=cap
        )
        run_record = self._started(pending, job)
        self._write_status(run_record, None, None)
        self._queue_agent_run(run_record)
        self.watch(run_record, on_done=self.agent_run_done)
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
                "per_agent_per_day": cap if cap is not None else self.quota.per_agent,
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

    def agent_spec(self, agent_id: str, bucket: str, submission: str, run: str) -> JobSpec:
        return self.spec(
            [
                Mount(bucket, submission, "/submission", read_only=True),
                Mount(bucket, run, "/state", read_only=False),
            ],
            private=False,
            labels={"collab": self.hub.settings.collab_slug, "agent": agent_id, "kind": "agent"},
        )

    def _now(self) -> str:
        return self.hub.clock.now().isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _started(self, record: RunRecord, job: LaunchedJob) -> RunRecord:
        return RunRecord(
            **{
                **record.__dict__,
                "job_id": job.job_id,
                "job_url": job.url,
                "started_at": self._now(),
            }
        )

    def launch_run(self, record: RunRecord, spec: JobSpec) -> RunRecord:
        """Launch a run outside any quota (the verifier's): placeholder, launch, status."""
        self._write_status(record, None, None)
        launched = self._started(record, self._launch(spec))
        self._write_status(launched, None, None)
        return launched

    # -- agents' runs on the queue, and their retries ---------------------------------------
    def _queue_agent_run(self, record: RunRecord) -> None:
        try:
            self.queue.add_running(record.job_id, **_queue_fields(record))
        except Exception as exc:  # the queue is a view: never fail a launched job for it
            log.error("could not put %s on the scoring queue: %s", record.job_id, exc)

    def agent_run_done(self, outcome: Outcome) -> None:
        """An agent's run ended: a platform failure is not charged, and a run that did not
        complete because of one is relaunched (up to JOB_PLATFORM_RETRIES) at no charge."""
        record, state = outcome.record, outcome.state
        reason = failure_reason(state)
        retry: RunRecord | None = None
        if reason == PLATFORM_ERROR and state.stage != COMPLETED and record.attempt <= self.retries:
            retry = self._relaunch(record)
        if reason == PLATFORM_ERROR:
            row = None
            if retry is not None:
                row = LedgerRow(
                    self.hub.clock.now(),
                    record.agent_id,
                    str(record.extra.get("hf_user", "")),
                    retry.job_id,
                    retry.status_bucket,
                    retry.run_prefix,
                    attempt=retry.attempt,
                )
            self.quota.release(record.job_id, PLATFORM_ERROR, retried_as=row)
        try:
            self.queue.done(
                record.job_id,
                reason=reason,
                outcome=state.stage,
                replace=None if retry is None else _queue_fields(retry) | {"key": retry.job_id},
            )
        except Exception as exc:
            log.error("could not take %s off the scoring queue: %s", record.job_id, exc)
        if retry is not None:
            self.watch(retry, on_done=self.agent_run_done)

    def adopt(self, entry: Entry) -> None:
        """Watch an agent's run whose worker stopped (from the queue's `adopt`)."""
        status = read_status(
            self.hub, str(entry.get("status_bucket", "")), str(entry.get("run_prefix", ""))
        )
        if status is None or status.get("job_id") != entry.get("job_id"):
            self.queue.done(str(entry["key"]), reason=PLATFORM_ERROR, outcome="lost")
            return
        self.watch(record_from_status(status), on_done=self.agent_run_done)

    def _relaunch(self, record: RunRecord) -> RunRecord | None:
        spec = self.agent_spec(
            record.agent_id, record.submission_bucket, record.submission_prefix, record.run_prefix
        )
        try:
            job = self._launch(spec)
        except JobLaunchFailed as exc:
            log.error("retry of %s not launched: %s", record.job_id, exc.message)
            return None
        previous = [*record.extra.get("previous_attempts", []), record.job_id]
        retry = RunRecord(
            **{
                **self._started(record, job).__dict__,
                "attempt": record.attempt + 1,
                "extra": {**record.extra, "previous_attempts": previous},
            }
        )
        self._write_status(retry, None, None)
        log.warning("job %s failed on the platform; retried as %s", record.job_id, job.job_id)
        return retry

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
            outcome = self.finish(record_from_status(status), state)
            self.queue.done(row.job_id, reason=failure_reason(outcome.state), outcome=state.stage)
            finished += 1
        return finished, running


def _queue_fields(record: RunRecord) -> dict[str, Any]:
    return {
        "kind": AGENT,
        "agent_id": record.agent_id,
        "job_id": record.job_id,
        "job_url": record.job_url,
        "queued_at": record.queued_at or record.launched_at,
        "attempt": record.attempt,
        "run": f"hf://buckets/{record.status_bucket}/{record.run_prefix}",
        "status_bucket": record.status_bucket,
        "run_prefix": record.run_prefix,
    }
