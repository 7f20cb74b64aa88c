"""The verifier (`VERIFIER_ENABLED`): re-run a champion's submission with the private eval
set and record a verdict in `results/verification_status.json`.

- Trigger: a promoted `agent-run` result that beats the best `valid` result (cold start: no
  valid result yet, so any result seeds the champion); already decided or in flight → skip.
- The submission is named in the result's frontmatter (`artifacts:` or `submission:`): a
  folder of the author's scratch bucket, a central `artifacts/{slug}_{author}/` folder, or a
  job run folder whose `job_status.json` points back at the submission it ran. If it cannot
  be located the author is told on the board how to fix it and the result stays pending.
- Verdict and recording: `verdicts.py` (`verdict_for`, `VerdictBook`). A failed job leaves
  the result pending with no announcement.
- `reconcile()` finishes runs whose watcher never reported (a restart) and half-recorded
  verdicts, through the same code; it is idempotent.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.errors import BucketSyncError
from agenthub.bucketsync.results.leaderboard import score_of
from agenthub.bucketsync.runners.base import COMPLETED, JobRunnerUnavailable, JobState, Mount
from agenthub.bucketsync.scoring.jobs import (
    SUMMARY_FILE,
    JobsService,
    Outcome,
    RunRecord,
    read_status,
    record_from_status,
)
from agenthub.bucketsync.scoring.verdicts import LEDGER_PREFIX, Located, VerdictBook
from agenthub.bucketsync.storage.base import read_json_object

log = logging.getLogger(__name__)


@dataclass
class ReconcileReport:
    examined: int = 0
    recorded: int = 0
    still_running: int = 0
    healed: int = 0
    skipped: int = 0


class Verifier(VerdictBook):
    """`verification.mode: jobs`: re-run champions as private jobs, then record verdicts."""

    def __init__(self, hub: Hub, jobs: JobsService) -> None:
        super().__init__(hub)
        self.jobs = jobs
        self._lock = threading.Lock()
        self._considering: set[str] = set()
        self.launched = 0

    def run_prefix(self, filename: str) -> str:
        return f"{self.settings.verification_runs_prefix}{filename}/"

    # -- trigger ----------------------------------------------------------------------------
    def consider_async(self, filename: str) -> None:
        """Best effort, off the request thread: `POST /v1/results` never waits or fails."""
        threading.Thread(
            target=self._consider_logged, args=(filename,), name=f"verify-{filename}", daemon=True
        ).start()

    def _consider_logged(self, filename: str) -> None:
        try:
            self.consider(filename)
        except Exception:
            log.exception("verifier could not consider %s", filename)

    def consider(self, filename: str) -> str:
        """Decide whether `filename` needs a re-run and launch it; returns what happened."""
        with self._lock:
            if filename in self._considering:
                return "in flight"
            self._considering.add(filename)
        try:
            return self._consider(filename)
        finally:
            with self._lock:
                self._considering.discard(filename)

    def _consider(self, filename: str) -> str:
        hub = self.hub
        record = hub.read_model.record(naming.result_path(filename), naming.RESULTS)
        if record is None:
            return "no such result"
        fm = record.frontmatter
        score = score_of(fm, self.settings.score_field)
        if fm.get("status") != "agent-run" or score is None:
            return "not eligible"
        index = self.index_fresh()
        if index is None:
            return "index unreadable"
        if index.get(filename, "pending") != "pending":
            return "already decided"
        if self.ledger(filename) is not None:
            return "already handled"
        champion = self.champion_score(index)
        if champion is not None and not self._beats(score, champion):
            return "not a champion"
        author = naming.parse_stamped_filename(filename)
        assert author is not None
        located, problem = self.locate(author[1], fm)
        if located is None:
            self.nudge(filename, author[1], problem)
            self.save_ledger(filename, {"state": "unlocatable", "problem": problem})
            return "unlocatable"
        return self._launch(filename, author[1], score, located)

    def _beats(self, score: float, champion: float) -> bool:
        return score > champion if self.settings.score_order == "desc" else score < champion

    def _launch(self, filename: str, author: str, reported: float, located: Located) -> str:
        s = self.settings
        run_prefix = self.run_prefix(filename)
        spec = self.jobs.spec(
            [
                Mount(located.bucket, located.prefix, "/submission", read_only=True),
                Mount(s.audit_bucket, s.private_dataset_prefix, "/private", read_only=True),
                Mount(s.audit_bucket, run_prefix, "/state", read_only=False),
            ],
            private=True,
            labels={"collab": s.collab_slug, "agent": author, "kind": "verifier"},
        )
        pending = RunRecord(
            job_id="",
            job_url="",
            kind="verifier",
            agent_id=author,
            submission_bucket=located.bucket,
            submission_prefix=located.prefix,
            status_bucket=s.audit_bucket,
            run_prefix=run_prefix,
            launched_at=self._now(),
            timeout_s=spec.timeout_s,
            extra={"result": filename, "reported": reported},
        )
        try:
            self.jobs.check_harness()
            record = self.jobs.launch_run(pending, spec)
        except BucketSyncError as exc:
            log.error("verification run for %s not launched: %s", filename, exc.message)
            self.save_ledger(filename, {"state": "failed", "message": exc.message})
            return "launch failed"
        self.save_ledger(
            filename,
            {
                "state": "running",
                "job_id": record.job_id,
                "job_url": record.job_url,
                "reported": reported,
                "run_prefix": run_prefix,
                "launched_at": record.launched_at,
            },
        )
        self.launched += 1
        self.jobs.watch(record, on_done=self.on_run_done)
        return "launched"

    # -- verdict ----------------------------------------------------------------------------
    def on_run_done(self, outcome: Outcome) -> None:
        filename = str(outcome.record.extra.get("result"))
        self.decide(filename, outcome.state)

    def decide(self, filename: str, state: JobState) -> str:
        ledger = self.ledger(filename) or {}
        if ledger.get("state") in ("decided", "deferred"):
            return self.commit(filename, ledger)
        if state.stage != COMPLETED:
            self.save_ledger(
                filename,
                {**ledger, "state": "failed", "stage": state.stage, "message": state.message},
            )
            return "job failed"
        return self.record(filename, ledger, self._summary(filename))

    def _summary(self, filename: str) -> dict[str, Any] | None:
        return read_json_object(
            self.hub.store, self.settings.audit_bucket, f"{self.run_prefix(filename)}{SUMMARY_FILE}"
        )

    # -- offline healing --------------------------------------------------------------------
    def reconcile(self) -> ReconcileReport:
        """Finish runs that ended without a recorded verdict (idempotent)."""
        report = ReconcileReport()
        audit = self.settings.audit_bucket
        for entry in self.hub.store.list(audit, LEDGER_PREFIX):
            if not entry.path.endswith("/verdict.json"):
                continue
            filename = entry.path[len(LEDGER_PREFIX) :].rsplit("/", 1)[0]
            if naming.parse_stamped_filename(filename) is None:
                continue
            report.examined += 1
            ledger = self.ledger(filename) or {}
            state = ledger.get("state")
            if state == "running":
                status = read_status(self.hub, audit, self.run_prefix(filename))
                if status is None or not status.get("job_id"):
                    report.skipped += 1
                    continue
                try:
                    job_state = self.jobs.runner.inspect(str(status["job_id"]))
                except JobRunnerUnavailable:
                    report.skipped += 1
                    continue
                if not job_state.terminal:
                    report.still_running += 1
                    continue
                self.jobs.finish(record_from_status(status), job_state)
                self.decide(filename, job_state)
                report.recorded += 1
            elif state == "decided" and not (
                ledger.get("written") == ledger.get("verdict") and ledger.get("announced")
            ):
                self.commit(filename, ledger)
                report.healed += 1
            else:
                report.skipped += 1
        return report
