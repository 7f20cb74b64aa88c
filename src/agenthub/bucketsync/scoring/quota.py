"""Benchmark-job quotas: a durable 24h sliding-window ledger in the audit bucket, and the
lock that serializes check → launch → record.

    QuotaLock (port): NamedQuotaLock over the hub's named locks (Redis with a lease when
                      BUCKETSYNC_BUS_URL is set, so several workers share one lock)
    QuotaLedger:      `JOB_QUOTA_LEDGER_PATH` (JSONL) in AUDIT_BUCKET; a read failure is
                      QUOTA_BACKEND_UNAVAILABLE (fail closed)
    JobQuota:         the rule: per agent and per hf_user caps over the last 24h

The ledger is re-read under the lock on every launch, never trusted from memory, because
another worker may have appended to it, and rewritten through the lock's lease (fenced,
`core.locks`): a worker whose lease ran out during a slow launch cannot put back a ledger
that misses the next holder's launch; its row is kept in memory and written with its next
successful save, like any failed ledger write. A row with `charging: false` is a run the platform
failed (`platform_error`): it stays in the ledger as a record and counts against no cap.

On S3 (`Hub.swaps`) there is no lock between the processes sharing the bucket: the ledger
is changed by compare-and-swap (`ConditionalStore`), and a launch first swaps in a
`reserved-…` row (the caps checked against the ledger it replaces), then starts the job and
swaps the reservation for its job id.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from agenthub.bucketsync.core.locks import Lease, Locks
from agenthub.bucketsync.errors import (
    QuotaBackendUnavailable,
    RateLimited,
    StorageUnavailable,
)
from agenthub.bucketsync.storage.base import (
    Batch,
    BucketStore,
    ConditionalStore,
    compare_and_swap,
)
from agenthub.clock import Clock

log = logging.getLogger(__name__)

WINDOW = timedelta(hours=24)
# The job id of a launch reserved before its job exists (`JobQuota` on S3).
RESERVED = "reserved-"
T = TypeVar("T")


class QuotaLock(Protocol):
    def hold(self) -> AbstractContextManager[Lease]:
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
    def hold(self) -> Iterator[Lease]:
        try:
            held = self._locks().hold(self._name)
            lease = held.__enter__()
        except StorageUnavailable as exc:
            raise QuotaBackendUnavailable(
                f"{exc.message}; nothing was launched", hint="retry in a minute"
            ) from exc
        try:
            yield lease
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
    charging: bool = True
    reason: str = ""  # why a non-charging row is not charged
    attempt: int = 1

    def to_json(self) -> str:
        row: dict[str, Any] = {
            "ts": self.ts.isoformat().replace("+00:00", "Z"),
            "agent_id": self.agent_id,
            "hf_user": self.hf_user,
            "job_id": self.job_id,
        }
        if self.run_prefix:
            row["status_bucket"], row["run_prefix"] = self.status_bucket, self.run_prefix
        if not self.charging:
            row["charging"], row["reason"] = False, self.reason
        if self.attempt > 1:
            row["attempt"] = self.attempt
        return json.dumps(row, separators=(",", ":"))


def parse_rows(data: bytes | None) -> list[LedgerRow]:
    """The ledger's JSONL rows (malformed lines are logged and skipped)."""
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
                    charging=raw.get("charging", True) is not False,
                    reason=str(raw.get("reason", "")),
                    attempt=int(raw.get("attempt", 1)),
                )
            )
        except (ValueError, KeyError, TypeError):
            log.warning("ledger line %d is malformed and ignored: %r", number, line[:200])
    return rows


def encode_rows(rows: list[LedgerRow]) -> bytes:
    return "".join(row.to_json() + "\n" for row in rows).encode()


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
        return parse_rows(data)

    def swap(self, change: Callable[[list[LedgerRow]], list[LedgerRow]], *, what: str) -> None:
        """Rewrite the ledger by compare-and-swap (S3: no lock; `change` may run again on
        what another writer left, so it only computes)."""
        assert isinstance(self._store, ConditionalStore)
        try:
            compare_and_swap(
                self._store,
                self._bucket,
                self.path,
                lambda data: encode_rows(change(parse_rows(data))),
            )
        except StorageUnavailable as exc:
            raise QuotaBackendUnavailable(
                f"the job-quota ledger could not be updated ({exc.message}); {what}",
                hint="retry in a minute",
            ) from exc

    def save(self, rows: list[LedgerRow], lease: Lease) -> None:
        """Rewrite the ledger as the quota lock's holder (`lease`: refused once the lock
        has passed to another holder, whose rows this write would erase)."""
        body = encode_rows(rows)
        lease.write(lambda: self._store.write_batch(self._bucket, Batch(adds=[(self.path, body)])))


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
        swaps: bool = False,
    ) -> None:
        self.ledger = ledger
        # S3 (`Hub.swaps`): the ledger is changed by compare-and-swap, not under `lock`.
        self.swaps = swaps
        self.lock = lock
        self._clock = clock
        self.per_agent = per_agent
        self.per_user = per_user
        # Launches whose ledger write failed: still counted here, and written with the next
        # successful save (a failed ledger write after a launch is not fatal).
        self._unsaved: list[LedgerRow] = []
        self.write_failures = 0

    def _window(self, stored: list[LedgerRow] | None = None) -> tuple[datetime, list[LedgerRow]]:
        """Now and the ledger's rows (`stored`, else read now) of the last 24h, with
        launches not yet saved."""
        now = self._clock.now()
        stored = self.ledger.rows() if stored is None else stored
        known = {row.job_id for row in stored}
        rows = stored + [r for r in self._unsaved if r.job_id not in known]
        return now, [row for row in rows if now - row.ts < WINDOW]

    def _save(self, rows: list[LedgerRow], lease: Lease, *, after: str) -> None:
        try:
            self.ledger.save(rows, lease)
            self._unsaved = []
        except Exception as exc:  # the job is running; keep counting it in memory
            self.write_failures += 1
            now = self._clock.now()
            known = {r.job_id for r in self._unsaved}
            self._unsaved = [
                r
                for r in self._unsaved + [r for r in rows if r.job_id not in known]
                if now - r.ts < WINDOW
            ]
            log.error("quota ledger write failed after %s: %s", after, exc)

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
        if self.swaps:
            return self._launch_swapped(agent_id, hf_user, start, status_bucket, run_prefix)
        with self.lock.hold() as lease:
            now, live = self._window()
            remaining = self._check(live, now, agent_id, hf_user)
            job_id, value = start()
            row = LedgerRow(now, agent_id, hf_user, job_id, status_bucket, run_prefix)
            self._save([*live, row], lease, after=f"launching {job_id}")
            return value, remaining

    def _check(
        self, live: list[LedgerRow], now: datetime, agent_id: str, hf_user: str
    ) -> Remaining:
        """What is left after one more launch; 429 with Retry-After when over a cap."""
        charged = [row for row in live if row.charging]
        by_agent = [row for row in charged if row.agent_id == agent_id]
        by_user = [row for row in charged if row.hf_user == hf_user]
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
        return Remaining(
            agent=max(0, self.per_agent - len(by_agent) - 1),
            user=max(0, self.per_user - len(by_user) - 1),
        )

    def _launch_swapped(
        self,
        agent_id: str,
        hf_user: str,
        start: Callable[[], tuple[str, T]],
        status_bucket: str,
        run_prefix: str,
    ) -> tuple[T, Remaining]:
        """`launch` without a lock: a row reserving the launch is swapped in (caps checked
        on the ledger it replaces), the job started, and the reservation then swapped for
        the job id (or dropped when the start failed). A crash between the two leaves the
        reservation charged until it ages out: never a launch the caps did not see."""
        hold = f"{RESERVED}{uuid.uuid4().hex}"
        remaining: list[Remaining] = []

        def reserve(rows: list[LedgerRow]) -> list[LedgerRow]:
            now, live = self._window(rows)
            remaining[:] = [self._check(live, now, agent_id, hf_user)]
            return [*live, LedgerRow(now, agent_id, hf_user, hold, status_bucket, run_prefix)]

        self.ledger.swap(reserve, what="nothing was launched")
        try:
            job_id, value = start()
        except BaseException:
            self._swap_logged(
                lambda rows: [r for r in rows if r.job_id != hold], after="a failed start"
            )
            raise
        self._swap_logged(
            lambda rows: [replace(r, job_id=job_id) if r.job_id == hold else r for r in rows],
            after=f"launching {job_id}",
        )
        return value, remaining[0]

    def _swap_logged(
        self, change: Callable[[list[LedgerRow]], list[LedgerRow]], after: str
    ) -> None:
        """A swap after the launch: its failure is logged and counted, never raised (the
        reservation row stays, charged, in its place)."""
        try:
            self.ledger.swap(change, what=f"after {after}")
        except QuotaBackendUnavailable as exc:
            self.write_failures += 1
            log.error("quota ledger write failed after %s: %s", after, exc.message)

    def release(self, job_id: str, reason: str, *, retried_as: LedgerRow | None = None) -> None:
        """Mark `job_id` non-charging (the platform failed it), and record the run that
        retries it, if any, in its place: a retry is the same request, so it is charged as
        that request was, without a second cap check."""

        def released(stored: list[LedgerRow]) -> list[LedgerRow]:
            _now, live = self._window(stored)
            rows = [
                replace(row, charging=False, reason=reason) if row.job_id == job_id else row
                for row in live
            ]
            return rows if retried_as is None else [*rows, retried_as]

        if self.swaps:
            self._swap_logged(released, after=f"releasing {job_id}")
            return
        with self.lock.hold() as lease:
            self._save(released(self.ledger.rows()), lease, after=f"releasing {job_id}")

    def usage(self, hf_user: str, agent_ids: list[str]) -> dict[str, Any]:
        """What `hf_user` and each of `agent_ids` have left in the window, and when the
        next run frees up (the oldest charged launch ageing out; null when none is used)."""
        now, live = self._window()

        def block(rows: list[LedgerRow], cap: int) -> dict[str, Any]:
            charged = [row for row in rows if row.charging]
            oldest = min((row.ts for row in charged), default=None)
            frees = oldest + WINDOW if oldest is not None else None
            return {
                "used": len(charged),
                "limit": cap,
                "remaining": max(0, cap - len(charged)),
                "not_charged": len(rows) - len(charged),
                "next_free_at": frees.isoformat().replace("+00:00", "Z") if frees else None,
                "next_free_in_s": round((frees - now).total_seconds(), 3) if frees else None,
            }

        return {
            "window_hours": WINDOW.total_seconds() / 3600,
            "user": {
                "hf_user": hf_user,
                **block([r for r in live if r.hf_user == hf_user], self.per_user),
            },
            "agents": [
                {
                    "agent_id": agent,
                    **block([r for r in live if r.agent_id == agent], self.per_agent),
                }
                for agent in agent_ids
            ],
        }
