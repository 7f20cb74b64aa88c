"""The verifier (`VERIFIER_ENABLED`): re-run a champion's submission with the private eval
set and record a verdict in `results/verification_status.json`.

- Trigger: a promoted `agent-run` result that beats the best `valid` result (cold start: no
  valid result yet, so any result seeds the champion); already decided or in flight → skip.
- The submission is named in the result's frontmatter (`artifacts:` or `submission:`): a
  folder of the author's scratch bucket, a central `artifacts/{slug}_{author}/` folder, or a
  job run folder whose `job_status.json` points back at the submission it ran. If it cannot
  be located the author is told on the board how to fix it and the result stays pending.
- Queue: an eligible result waits on the scoring queue (`queue.py`, `GET /v1/queue`) for
  one of `VERIFIER_CONCURRENCY` slots; a loop thread dispatches it and posts the heartbeat.
- Pins: when the result has a pin (`results/pins.py`), the pinned files are compared with
  the folder as it is now (a file changed or vanished → `invalid`, reason
  `submission_changed`, without a run) and copied by content hash to
  `verification_submissions/{filename}/` in the audit bucket, which is what the run mounts
  at /submission: the exact content promoted, whatever the folder holds later.
- Verdict and recording: `verdicts.py` (`verdict_for`, `VerdictBook`). A failed job leaves
  the result pending with no announcement; one the platform failed (`platform_error`) goes
  back to the head of the queue, up to `JOB_PLATFORM_RETRIES` times, and then the author is
  told once on the board to re-submit it (`resubmit.py`, `POST
  /v1/results/{filename}:reverify`), whose charge to the quota is released meanwhile.
- `reconcile()` finishes runs whose watcher never reported (a restart), half-recorded
  verdicts, and verdicts the ledger records as written that the index shows as pending
  (a lost index write), through the same code; it is idempotent.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agenthub.bucketsync.core import naming
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.errors import BucketSyncError, StorageUnavailable
from agenthub.bucketsync.phases.schedule import has_private_split
from agenthub.bucketsync.results.leaderboard import score_of
from agenthub.bucketsync.results.pins import Located, changes, read_pin
from agenthub.bucketsync.runners.base import (
    COMPLETED,
    PLATFORM_ERROR,
    SUBMISSION_CHANGED,
    SUBMISSION_MISSING,
    JobRunnerUnavailable,
    JobState,
    Mount,
)
from agenthub.bucketsync.scoring.jobs import JobsService
from agenthub.bucketsync.scoring.queue import DONE, QUEUED, VERIFICATION, Entry
from agenthub.bucketsync.scoring.runs import (
    SUMMARY_FILE,
    Outcome,
    RunRecord,
    failure_reason,
    read_status,
    record_from_status,
)
from agenthub.bucketsync.scoring.verdicts import LEDGER_PREFIX, VerdictBook
from agenthub.bucketsync.storage.base import Batch, read_json_object

log = logging.getLogger(__name__)

PINNED_PREFIX = "verification_submissions/"
# What a re-submission adds to the ledger, kept through its run to the verdict.
RESUBMISSION_KEYS = ("resubmissions", "resubmitted_by", "charge", "previous", "told_to_resubmit")


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
        self.queue = jobs.queue
        self._lock = threading.Lock()
        self._considering: set[str] = set()
        self.launched = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the loop: heartbeat and dispatch ---------------------------------------------------
    def start(self) -> None:
        """Post heartbeats and dispatch the queue (runs queued by other workers or before a
        restart too) on a daemon thread until `stop()`."""
        self._thread = threading.Thread(target=self._loop, name="verifier", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        beat_every = self.settings.verifier_heartbeat_s
        next_beat = 0.0
        while not self._stop.is_set():
            # A pass stamps what it publishes (as a request does): one that fails settles
            # its stamps when it ends instead of holding every stream for the stamp lease.
            try:
                with self.hub.stamps.settling():
                    if self.hub.clock.monotonic() >= next_beat:
                        self.queue.heartbeat()
                        next_beat = self.hub.clock.monotonic() + beat_every
                        self.adopt()
                    self.dispatch()
            except Exception:
                log.exception("verifier loop pass failed")
            self._wake.wait(beat_every)
            self._wake.clear()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop and say so on the queue (a crash says so by its silence)."""
        if self._thread is None:
            return
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)
        self._thread = None
        try:
            self.queue.heartbeat(stopped=True)
        except Exception as exc:
            log.warning("could not post the verifier's last heartbeat: %s", exc)

    def adopt(self) -> None:
        """Watch the runs of workers that stopped (their watchers died with them): a run
        that ended meanwhile is finished and decided at once; one whose status cannot be
        found is queued again."""
        for entry in self.queue.adopt():
            if entry["kind"] != VERIFICATION:
                self.jobs.adopt(entry)
                continue
            filename = str(entry["result"])
            status = read_status(self.hub, self.settings.audit_bucket, self.run_prefix(filename))
            if status is None or status.get("job_id") != entry.get("job_id"):
                self.queue.done(filename, reason=PLATFORM_ERROR, retry=True)
                continue
            log.warning("adopting the verification run of %s (%s)", filename, entry["job_id"])
            self.jobs.watch(record_from_status(status), on_done=self.on_run_done)

    def dispatch(self) -> list[str]:
        """Launch waiting verifications into free slots; returns the results launched."""
        return self.queue.dispatch(self._start)

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
            with self.hub.stamps.settling():  # off any request: settle as one would
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
        # With a private split every result needs its private score, champion or not.
        champion = None if has_private_split(self.settings) else self.champion_score(index)
        if champion is not None and not self._beats(score, champion):
            return "not a champion"
        author = naming.parse_stamped_filename(filename)
        assert author is not None
        if read_pin(self.hub, filename) is None:
            located, problem = self.locate(author[1], fm)
            if located is None:
                self._unlocatable(filename, author[1], problem)
                return "unlocatable"
        self.save_ledger(filename, {"state": "queued", "reported": score})
        self.queue.enqueue(filename, result=filename, agent_id=author[1], reported=score)
        self._wake.set()
        return "launched" if filename in self.dispatch() else "queued"

    def requeue(
        self, filename: str, *, agent_id: str, reported: float, fields: dict[str, Any]
    ) -> str:
        """Queue `filename` for verification again (a re-submission); returns whether it was
        launched at once or queued."""
        self.save_ledger(filename, {"state": "queued", "reported": reported, **fields})
        self.queue.enqueue(filename, result=filename, agent_id=agent_id, reported=reported)
        self._wake.set()
        return "launched" if filename in self.dispatch() else "queued"

    def _platform_failed(self, filename: str, fields: dict[str, Any]) -> None:
        """The platform failed the verification for good: record it, release a
        re-submission's charge, and tell the author (once) how to re-submit."""
        ledger = {**(self.ledger(filename) or {}), **fields, "state": "failed"}
        ledger["reason"] = PLATFORM_ERROR
        charge = ledger.get("charge")
        if charge and not ledger.get("charge_released"):
            self.jobs.quota.release(str(charge), PLATFORM_ERROR)
            ledger["charge_released"] = True
        self.save_ledger(filename, ledger)
        if ledger.get("told_to_resubmit") == ledger.get("resubmissions", 0):
            return
        author = naming.parse_stamped_filename(filename)
        assert author is not None
        self.announce(
            f"@{author[1]} the verification of your result `{filename}` failed on the "
            f"platform (`{PLATFORM_ERROR}`), not because of your submission; it stays "
            f"pending. Re-submit it with `POST /v1/results/{filename}:reverify` and your "
            "Bearer token (MCP tool `reverify_result`); promoting it again would be "
            "409 ALREADY_PROMOTED.\n",
            refs=[naming.result_path(filename)],
            kind="verification",
        )
        self.save_ledger(filename, {**ledger, "told_to_resubmit": ledger.get("resubmissions", 0)})

    def _unlocatable(self, filename: str, author: str, problem: str) -> None:
        self.nudge(filename, author, problem)
        self.save_ledger(
            filename, {"state": "unlocatable", "problem": problem, "reason": SUBMISSION_MISSING}
        )

    def _beats(self, score: float, champion: float) -> bool:
        return score > champion if self.settings.score_order == "desc" else score < champion

    def _start(self, entry: Entry) -> dict[str, Any] | None:
        """Launch one queued verification (the queue's `launch`): the run's fields, None
        when it ended without a run, or the entry back in the queue after a failed launch."""
        filename = str(entry["result"])
        try:
            return self._launch(filename, entry)
        except Exception:
            log.exception("verification run for %s not launched", filename)
            self._platform_failed(filename, {})
            return {"state": DONE, "reason": PLATFORM_ERROR, "outcome": "failed"}

    def _submission(self, filename: str, author: str) -> tuple[Located | None, dict[str, Any]]:
        """The content to run: the pinned copy when the result has a pin, else the folder
        as it is now, and what the run's status says about the pin. None when that is
        impossible (already recorded in the ledger)."""
        pin = read_pin(self.hub, filename)
        if pin is None:
            record = self.hub.read_model.record(naming.result_path(filename), naming.RESULTS)
            located, problem = self.locate(author, record.frontmatter if record else {})
            if located is None:
                self._unlocatable(filename, author, problem)
            return located, {"pinned_source": None}
        changed = changes(self.hub, pin)
        staged = self._stage(filename, pin) if not changed else None
        if staged is None:
            self._changed(filename, changed or [{"path": "*", "change": "unavailable"}])
        return staged, {"pinned_source": pin["source"], "pin_hash": pin["manifest_hash"]}

    def _stage(self, filename: str, pin: Mapping[str, Any]) -> Located | None:
        """Copy the pinned files by content hash into the audit bucket; None if the store no
        longer has one of them (it changed after the comparison)."""
        prefix = f"{PINNED_PREFIX}{filename}/"
        copies = [
            (str(pin["bucket"]), str(row["content_hash"]), prefix + str(row["path"]))
            for row in pin["files"]
        ]
        try:
            self.hub.store.write_batch(self.settings.audit_bucket, Batch(copies=copies))
        except StorageUnavailable as exc:
            log.warning("pinned copy of %s failed: %s", filename, exc.message)
            return None
        return Located(self.settings.audit_bucket, prefix)

    def _changed(self, filename: str, changed: list[dict[str, str]]) -> None:
        ledger = {
            **(self.ledger(filename) or {}),
            "state": "decided",
            "verdict": "invalid",
            "reason": SUBMISSION_CHANGED,
            "changed": changed[:20],
            "changed_count": len(changed),
            "written": None,
            "announced": False,
        }
        self.save_ledger(filename, ledger)
        self.commit(filename, ledger)

    def _launch(self, filename: str, entry: Entry) -> dict[str, Any] | None:
        s = self.settings
        author, reported = str(entry["agent_id"]), float(entry["reported"])
        located, pinned = self._submission(filename, author)
        if located is None:
            ledger = self.ledger(filename) or {}
            return {"state": DONE, "reason": ledger.get("reason"), "outcome": ledger.get("state")}
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
            extra={"result": filename, "reported": reported, **pinned},
            queued_at=str(entry.get("queued_at") or ""),
            attempt=int(entry["attempt"]),
        )
        try:
            self.jobs.check_harness()
            record = self.jobs.launch_run(pending, spec)
        except BucketSyncError as exc:
            log.error("verification run for %s not launched: %s", filename, exc.message)
            if int(entry["attempt"]) <= self.jobs.retries:
                return {"state": QUEUED, "reason": PLATFORM_ERROR}  # the next pass retries
            self._platform_failed(filename, {"message": exc.message})
            return {"state": DONE, "reason": PLATFORM_ERROR, "outcome": "failed"}
        kept = self.ledger(filename) or {}
        self.save_ledger(
            filename,
            {
                **{k: kept[k] for k in RESUBMISSION_KEYS if k in kept},
                "state": "running",
                "job_id": record.job_id,
                "job_url": record.job_url,
                "reported": reported,
                "run_prefix": run_prefix,
                "launched_at": record.launched_at,
                "attempt": record.attempt,
            },
        )
        self.launched += 1
        self.jobs.watch(record, on_done=self.on_run_done)
        return {"job_id": record.job_id, "job_url": record.job_url}

    # -- verdict ----------------------------------------------------------------------------
    def on_run_done(self, outcome: Outcome) -> None:
        record, state = outcome.record, outcome.state
        filename = str(record.extra.get("result"))
        reason = failure_reason(state)
        retry = record.attempt <= self.jobs.retries
        if reason == PLATFORM_ERROR and state.stage != COMPLETED and retry:
            ledger = self.ledger(filename) or {}
            self.save_ledger(filename, {**ledger, "state": "queued", "reason": reason})
            self.queue.done(filename, reason=reason, retry=True)
            self.dispatch()
            return
        outcome_text = self.decide(filename, state)
        ledger = self.ledger(filename) or {}
        self.queue.done(filename, reason=ledger.get("reason"), outcome=outcome_text)
        self.dispatch()

    def decide(self, filename: str, state: JobState) -> str:
        ledger = self.ledger(filename) or {}
        if ledger.get("state") in ("decided", "deferred"):
            return self.commit(filename, ledger)
        if state.stage != COMPLETED:
            failed = {"stage": state.stage, "message": state.message}
            if failure_reason(state) == PLATFORM_ERROR:
                self._platform_failed(filename, failed)
                return "job failed"
            self.save_ledger(
                filename, {**ledger, **failed, "state": "failed", "reason": failure_reason(state)}
            )
            return "job failed"
        return self.record(filename, ledger, self._summary(filename))

    def _summary(self, filename: str) -> dict[str, Any] | None:
        return read_json_object(
            self.hub.store, self.settings.audit_bucket, f"{self.run_prefix(filename)}{SUMMARY_FILE}"
        )

    # -- offline healing --------------------------------------------------------------------
    def reconcile(self) -> ReconcileReport:
        """Finish runs that ended without a recorded verdict, and put back into the index
        every decided verdict it does not show (a lost write: the author was told the
        verdict, the leaderboard shows `pending`). Idempotent."""
        report = ReconcileReport()
        audit = self.settings.audit_bucket
        index = self.index_fresh()
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
                ledger.get("written") == ledger.get("verdict")
                and ledger.get("announced")
                and (index is None or index.get(filename, "pending") != "pending")
            ):
                # `commit` re-reads the index under its lock: a human verdict still wins.
                self.commit(filename, ledger)
                report.healed += 1
            else:
                report.skipped += 1
        return report
