"""The in-process watcher of runs: it polls the runner until a run ends, cancels one that
runs past `JOB_TIMEOUT_MINUTES` plus `JOB_CANCEL_GRACE_S` (reason `timeout`), and writes
`job_logs.txt` + `job_status.json` into the run prefix (lost logs: reason
`platform_error`). `JobsService` is a `RunWatcher`.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable

from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.errors import JobLaunchFailed, StorageUnavailable
from agenthub.bucketsync.runners.base import (
    CANCELED,
    PLATFORM_ERROR,
    TIMEOUT,
    JobRunner,
    JobRunnerUnavailable,
    JobState,
)
from agenthub.bucketsync.scoring.runs import LOGS_FILE, STATUS_FILE, Outcome, RunRecord
from agenthub.bucketsync.storage.base import Batch

log = logging.getLogger(__name__)


class RunWatcher:
    def __init__(self, hub: Hub, runner: JobRunner) -> None:
        self.hub = hub
        self.runner = runner
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.watching = 0
        self.finished = 0

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
                        TIMEOUT,
                    )
                    break
                self._stop.wait(self.hub.settings.job_poll_s)
            # Off any request: what the ending stamps is settled when it ends, as a
            # request's would be, whether its writes landed or failed.
            with self.hub.stamps.settling():
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
            # Lost logs are the platform's failure: the run is not charged.
            state = JobState(state.stage, state.message, PLATFORM_ERROR)
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

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop watching (a restart): running jobs are left to `verify reconcile`."""
        self._stop.set()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout)
