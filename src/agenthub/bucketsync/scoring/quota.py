"""Benchmark-job quotas: a durable 24h sliding-window ledger in the audit bucket, and the
lock that serializes check → launch → record.

    QuotaLock (port): NamedQuotaLock over the hub's named locks (Redis with a lease when
                      BUCKETSYNC_BUS_URL is set, so several workers share one lock)
    QuotaLedger:      `JOB_QUOTA_LEDGER_PATH` (JSONL) in AUDIT_BUCKET; a read failure is
                      QUOTA_BACKEND_UNAVAILABLE (fail closed)
    JobQuota:         the rule: per agent and per hf_user caps over the last 24h

The ledger is re-read under the lock on every launch, never trusted from memory, because
another worker may have appended to it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, TypeVar

from agenthub.bucketsync.core.locks import Locks
from agenthub.bucketsync.errors import (
    QuotaBackendUnavailable,
    RateLimited,
    StorageUnavailable,
)
from agenthub.bucketsync.storage.base import Batch, BucketStore
from agenthub.clock import Clock

log = logging.getLogger(__name__)

WINDOW = timedelta(hours=24)
T = TypeVar("T")


class QuotaLock(Protocol):
    def hold(self) -> AbstractContextManager[None]:
        """Hold the quota lock; raise `QuotaBackendUnavailable` if it cannot be taken."""
        ...


class NamedQuotaLock:
    """The quota sequence under one of the hub's named locks (`bucketsync.locks`): in-process
    by default, Redis with a lease once the bus is configured, so it holds across workers.
    The lock store is looked up at each use, because the bus installs it after start-up."""

    def __init__(self, locks: Callable[[], Locks], name: str = "job-quota") -> None:
        self._locks = locks
        self._name = name

    @contextmanager
    def hold(self) -> Iterator[None]:
        try:
            held = self._locks().hold(self._name)
            held.__enter__()
        except StorageUnavailable as exc:
            raise QuotaBackendUnavailable(
                f"{exc.message}; nothing was launched", hint="retry in a minute"
            ) from exc
        try:
            yield
        finally:
            held.__exit__(None, None, None)


@dataclass(frozen=True)
class LedgerRow:
    ts: datetime
    agent_id: str
    hf_user: str
    job_id: str
    # Where the run reports (so `verify reconcile` can finish runs nobody watched).
    status_bucket: str = ""
    run_prefix: str = ""

    def to_json(self) -> str:
        row = {
            "ts": self.ts.isoformat().replace("+00:00", "Z"),
            "agent_id": self.agent_id,
            "hf_user": self.hf_user,
            "job_id": self.job_id,
        }
        if self.run_prefix:
            row["status_bucket"], row["run_prefix"] = self.status_bucket, self.run_prefix
        return json.dumps(row, separators=(",", ":"))


class QuotaLedger:
    def __init__(self, store: BucketStore, bucket: str, path: str) -> None:
        self._store = store
        self._bucket = bucket
        self.path = path

    def rows(self) -> list[LedgerRow]:
        try:
            data = self._store.read(self._bucket, self.path)
        except StorageUnavailable as exc:
            raise QuotaBackendUnavailable(
                f"the job-quota ledger could not be read ({exc.message}); nothing was launched",
                hint="retry in a minute",
            ) from exc
        rows = []
        for number, line in enumerate((data or b"").decode("utf-8", "replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                rows.append(
                    LedgerRow(
                        ts=datetime.fromisoformat(str(raw["ts"]).replace("Z", "+00:00")),
                        agent_id=str(raw["agent_id"]),
                        hf_user=str(raw["hf_user"]),
                        job_id=str(raw.get("job_id", "")),
                        status_bucket=str(raw.get("status_bucket", "")),
                        run_prefix=str(raw.get("run_prefix", "")),
                    )
                )
            except (ValueError, KeyError, TypeError):
                log.warning("ledger line %d is malformed and ignored: %r", number, line[:200])
        return rows

    def save(self, rows: list[LedgerRow]) -> None:
        body = "".join(row.to_json() + "\n" for row in rows).encode()
        self._store.write_batch(self._bucket, Batch(adds=[(self.path, body)]))


@dataclass(frozen=True)
class Remaining:
    agent: int
    user: int


class JobQuota:
    """`JOB_PER_AGENT_PER_DAY` / `JOB_PER_USER_PER_DAY` over a sliding 24h window."""

    def __init__(
        self,
        ledger: QuotaLedger,
        lock: QuotaLock,
        clock: Clock,
        *,
        per_agent: int,
        per_user: int,
    ) -> None:
        self.ledger = ledger
        self.lock = lock
        self._clock = clock
        self.per_agent = per_agent
        self.per_user = per_user
        # Launches whose ledger write failed: still counted here, and written with the next
        # successful save (a failed ledger write after a launch is not fatal).
        self._unsaved: list[LedgerRow] = []
        self.write_failures = 0

    def launch(
        self,
        agent_id: str,
        hf_user: str,
        start: Callable[[], tuple[str, T]],
        *,
        status_bucket: str = "",
        run_prefix: str = "",
    ) -> tuple[T, Remaining]:
        """Check both caps, call `start()` → (job_id, value), and record the launch, all
        under the lock. Over quota → 429 with Retry-After; a failing `start` is not counted."""
        with self.lock.hold():
            now = self._clock.now()
            stored = self.ledger.rows()
            known = {row.job_id for row in stored}
            rows = [r for r in stored + [r for r in self._unsaved if r.job_id not in known]]
            live = [row for row in rows if now - row.ts < WINDOW]
            by_agent = [row for row in live if row.agent_id == agent_id]
            by_user = [row for row in live if row.hf_user == hf_user]
            for used, cap, what in (
                (by_agent, self.per_agent, f"agent {agent_id!r}"),
                (by_user, self.per_user, f"user {hf_user!r}"),
            ):
                if len(used) >= cap:
                    oldest = min(row.ts for row in used) if used else now
                    wait = max(1.0, (oldest + WINDOW - now).total_seconds())
                    raise RateLimited(
                        f"{what} has used {len(used)} of {cap} benchmark jobs in the last 24h",
                        retry_after_s=wait,
                        hint=f"the oldest launch ages out in {int(wait)}s",
                    )
            job_id, value = start()
            row = LedgerRow(now, agent_id, hf_user, job_id, status_bucket, run_prefix)
            try:
                self.ledger.save([*live, row])
                self._unsaved = []
            except Exception as exc:  # the job is running; keep counting it in memory
                self.write_failures += 1
                self._unsaved = [r for r in [*self._unsaved, row] if now - r.ts < WINDOW]
                log.error("quota ledger write failed after launching %s: %s", job_id, exc)
            return value, Remaining(
                agent=max(0, self.per_agent - len(by_agent) - 1),
                user=max(0, self.per_user - len(by_user) - 1),
            )
