"""The scoring queue everyone can see (`GET /v1/queue`): verifications waiting for a slot,
runs on the platform (verifier re-runs and agents' jobs), the verifier's heartbeat, and the
last durations the ETAs come from.

It is one JSON file, `scoring/queue.json` in the audit bucket, changed only through
`core.shared` edits (under the hub's named `scoring-queue` lock, Redis once the bus is
configured; by compare-and-swap on S3), so every worker, on any machine, sees and
dispatches the same queue and it survives a restart. Each entry carries `queued_at`,
`started_at`, `attempt` and, after a failure, a `reason` from `runners.base.FAILURE_REASONS`.

ETA: the median of the last `DURATION_SAMPLES` run durations of that kind; running runs
finish at `started_at + median`, and waiting verifications take the earliest free slot of
`VERIFIER_CONCURRENCY` in queue order. No samples yet → `eta_s: null` (unknown, never 0).
"""

from __future__ import annotations

import heapq
import json
import logging
import os
import socket
import statistics
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.shared import edits
from agenthub.bucketsync.runners.base import FAILURE_REASONS

log = logging.getLogger(__name__)

QUEUE_PATH = "scoring/queue.json"
LOCK = "scoring-queue"
DURATION_SAMPLES = 20
RECENT = 20
VERIFICATION, AGENT = "verification", "agent"
QUEUED, RUNNING, DONE = "queued", "running", "done"
# A heartbeat older than this many intervals means the verifier stopped.
STALE_INTERVALS = 3

Entry = dict[str, Any]
State = dict[str, Any]


def _stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def median_s(samples: list[float]) -> float | None:
    return float(statistics.median(samples)) if samples else None


def estimate(
    running_elapsed: list[float], waiting: int, median: float | None, slots: int
) -> tuple[list[float | None], list[float | None]]:
    """Seconds until each running run ends, and until each waiting one (in order) ends,
    with `slots` runs at a time; all None without a median."""
    if median is None:
        return [None] * len(running_elapsed), [None] * waiting
    ends = [max(0.0, median - elapsed) for elapsed in running_elapsed]
    free = sorted(ends)[: max(1, slots)]
    free += [0.0] * (max(1, slots) - len(free))
    heapq.heapify(free)
    waits: list[float | None] = []
    for _ in range(waiting):
        start = heapq.heappop(free)
        waits.append(start + median)
        heapq.heappush(free, start + median)
    return list(ends), waits


class ScoringQueue:
    def __init__(self, hub: Hub, *, concurrency: int, heartbeat_s: float) -> None:
        self.hub = hub
        self.concurrency = concurrency
        self.heartbeat_s = heartbeat_s
        # Who watches a run: a run whose worker stopped beating is adopted by another.
        self.worker = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"

    # -- storage ----------------------------------------------------------------------------
    def load(self) -> State:
        return self.parse(self.hub.store.read(self.hub.settings.audit_bucket, QUEUE_PATH))

    @staticmethod
    def parse(data: bytes | None) -> State:
        """The queue's file as a state, with every key present (absent or unreadable: empty)."""
        try:
            parsed = json.loads(data) if data is not None else {}
        except ValueError:
            parsed = {}
        state: State = parsed if isinstance(parsed, dict) else {}
        state.setdefault("entries", [])
        state.setdefault("durations", {VERIFICATION: [], AGENT: []})
        state.setdefault("recent", [])
        state.setdefault("heartbeat", None)
        return state

    def edits(self) -> Iterator[State]:
        """The passes of one read-modify-write of the queue (`core.shared`: under its lock,
        or by compare-and-swap on S3): each pass gets the queue as stored and the state it
        leaves is written when the loop body ends (a `break` or `return` writes nothing)."""
        for edit in edits(self.hub, self.hub.settings.audit_bucket, QUEUE_PATH, LOCK):
            state = self.parse(edit.data)
            yield state
            edit.write(json.dumps(state, indent=1, sort_keys=True).encode())

    def _now(self) -> str:
        return _stamp(self.hub.clock.now())

    # -- changes ----------------------------------------------------------------------------
    def enqueue(self, key: str, **fields: Any) -> bool:
        """Add a waiting verification; False if `key` is already queued or running."""
        added = False
        for state in self.edits():
            added = not any(e["key"] == key for e in state["entries"])
            if not added:
                break
            state["entries"].append(
                {
                    "key": key,
                    "kind": VERIFICATION,
                    "state": QUEUED,
                    "queued_at": self._now(),
                    "started_at": None,
                    "attempt": 0,
                    "reason": None,
                    **fields,
                }
            )
        return added

    def dispatch(self, launch: Callable[[Entry], dict[str, Any] | None]) -> list[str]:
        """Start waiting verifications while fewer than `concurrency` run: `launch(entry)`
        returns the fields of the started run, `{"state": DONE, "reason", "outcome"}` when
        the entry ended without a run (decided, or not launchable), or `{"state": QUEUED,
        ...}` to leave it waiting for the next pass. Returns the keys started.

        Entries are first claimed (`launching`: this worker, still shown as waiting) in one
        edit, then launched outside any edit, then recorded: a launch is never repeated by a
        retried compare-and-swap, and two workers never launch one entry (only one claim
        lands). A claim whose worker stopped beating is given back by `adopt`."""
        claimed: list[Entry] = []
        for state in self.edits():
            entries: list[Entry] = state["entries"]
            claimed = []
            busy = sum(1 for e in entries if e["kind"] == VERIFICATION and _busy(e))
            for entry in entries:
                if busy >= self.concurrency:
                    break
                if entry["kind"] != VERIFICATION or _busy(entry):
                    continue
                entry["launching"] = self.worker
                entry["attempt"] = int(entry.get("attempt", 0)) + 1
                claimed.append(dict(entry))
                busy += 1
            if not claimed:
                break
        started: list[str] = []
        for number, entry in enumerate(claimed):
            fields = launch({k: v for k, v in entry.items() if k != "launching"})
            self._record_launch(entry, fields)
            if fields is not None and fields.get("state") == QUEUED:
                for later in claimed[number + 1 :]:  # not launched: all wait for the next pass
                    self._record_launch(later, {"state": QUEUED, "attempt": later["attempt"] - 1})
                break
            if fields is not None and fields.get("state") != DONE:
                started.append(str(entry["key"]))
        return started

    def _record_launch(self, claim: Entry, fields: dict[str, Any] | None) -> None:
        """What became of a claimed entry's launch (see `dispatch`)."""
        for state in self.edits():
            entries: list[Entry] = state["entries"]
            entry = next(
                (
                    e
                    for e in entries
                    if e["key"] == claim["key"] and e.get("launching") == self.worker
                ),
                None,
            )
            if entry is None:  # no longer this claim (a reverify, an adoption): leave it
                break
            del entry["launching"]
            if fields is None or fields.get("state") == DONE:
                entries.remove(entry)
                if fields is not None:
                    self._remember(state, {**entry, **fields})
            elif fields.get("state") == QUEUED:
                entry.update(fields)
            else:
                entry.update(
                    {"state": RUNNING, "started_at": self._now(), "worker": self.worker, **fields}
                )

    def add_running(self, key: str, **fields: Any) -> None:
        """Record a run that is already on the platform (an agent's job)."""
        for state in self.edits():
            state["entries"] = [e for e in state["entries"] if e["key"] != key]
            state["entries"].append(
                {
                    "key": key,
                    "kind": AGENT,
                    "state": RUNNING,
                    "started_at": self._now(),
                    "worker": self.worker,
                    **fields,
                }
            )

    def done(
        self,
        key: str,
        *,
        reason: str | None,
        retry: bool = False,
        outcome: str = "",
        replace: dict[str, Any] | None = None,
    ) -> Entry | None:
        """A run ended. Its duration joins the ETA samples unless the platform failed it;
        `retry` puts a verification back at the head of the queue with its `reason`;
        `replace` swaps the entry's fields for a run relaunched in its place (an agent's
        job). Returns the entry as it was, or None if it was not in the queue."""
        found: Entry | None = None
        for state in self.edits():
            found = next((e for e in state["entries"] if e["key"] == key), None)
            if found is None:
                break
            entry = dict(found)
            now = self.hub.clock.now()
            started = _parse(entry.get("started_at"))
            if started is not None and reason != "platform_error":
                samples = state["durations"].setdefault(entry["kind"], [])
                samples.append(round((now - started).total_seconds(), 3))
                del samples[:-DURATION_SAMPLES]
            state["entries"].remove(found)
            if retry and entry["kind"] == VERIFICATION:
                again = {**entry, "state": QUEUED, "started_at": None, "reason": reason}
                again.pop("job_id", None), again.pop("job_url", None)
                again.pop("launching", None)
                state["entries"].insert(0, again)
            elif replace is not None:
                state["entries"].append({**entry, **replace, "reason": reason})
            else:
                self._remember(state, {**entry, "reason": reason, "outcome": outcome})
        return None if found is None else dict(found)

    def _remember(self, state: State, entry: Entry) -> None:
        """Keep an ended entry among the last `RECENT` (what failed, and why)."""
        ended = {k: v for k, v in entry.items() if k != "state"}
        state["recent"].append({**ended, "finished_at": self._now()})
        del state["recent"][:-RECENT]

    def heartbeat(self, *, stopped: bool = False) -> None:
        """This worker is alive (or, `stopped`, no longer): the queue shows the last beat."""
        for state in self.edits():
            now = self._now()
            state["heartbeat"] = {"worker": self.worker, "at": now, "stopped": stopped}
            workers = state.setdefault("workers", {})
            if stopped:
                workers.pop(self.worker, None)
            else:
                workers[self.worker] = now

    def adopt(self) -> list[Entry]:
        """Take over the running entries of workers that stopped beating (a restart, a
        crash): they become this worker's to watch. Returns them."""
        adopted: list[Entry] = []
        for state in self.edits():
            adopted = []
            now = self.hub.clock.now()
            stale = STALE_INTERVALS * self.heartbeat_s
            workers = state.setdefault("workers", {})
            alive = {
                w
                for w, at in workers.items()
                if (t := _parse(at)) is not None and (now - t).total_seconds() <= stale
            }
            state["workers"] = {w: at for w, at in workers.items() if w in alive}
            for entry in state["entries"]:
                if entry.get("launching") not in alive | {self.worker, None}:
                    del entry["launching"]  # its launcher died before recording it
                if entry["state"] == RUNNING and entry.get("worker") not in alive | {self.worker}:
                    entry["worker"] = self.worker
                    adopted.append(dict(entry))
        return adopted

    # -- the view ---------------------------------------------------------------------------
    def entry(self, key: str) -> Entry | None:
        """One queue entry with its position and ETA, or None."""
        view = self.view()
        return next((e for e in view["queue"] + view["running"] if e["key"] == key), None)

    def view(self, *, verifier_enabled: bool = True) -> dict[str, Any]:
        state = self.load()
        now = self.hub.clock.now()
        entries: list[Entry] = state["entries"]
        medians = {
            kind: median_s(state["durations"].get(kind, [])) for kind in (VERIFICATION, AGENT)
        }

        def elapsed(entry: Entry) -> float:
            started = _parse(entry.get("started_at"))
            return max(0.0, (now - started).total_seconds()) if started else 0.0

        running = [e for e in entries if e["state"] == RUNNING]
        waiting = [e for e in entries if e["state"] == QUEUED]
        shown_running: list[Entry] = []
        shown_queue: list[Entry] = []
        for kind in (VERIFICATION, AGENT):
            mine = [e for e in running if e["kind"] == kind]
            ends, waits = estimate(
                [elapsed(e) for e in mine],
                len(waiting) if kind == VERIFICATION else 0,
                medians[kind],
                self.concurrency if kind == VERIFICATION else len(mine),
            )
            shown_running += [
                _eta({**e, "position": 0}, end, now) for e, end in zip(mine, ends, strict=True)
            ]
            if kind == VERIFICATION:
                shown_queue = [
                    _eta({**e, "position": n}, wait, now)
                    for n, (e, wait) in enumerate(zip(waiting, waits, strict=True), 1)
                ]
        return {
            "generated_at": _stamp(now),
            "verifier": self._verifier(state, now, verifier_enabled),
            "queue": shown_queue,
            "running": shown_running,
            "recent": list(reversed(state["recent"])),
            "durations": {
                kind: {
                    "median_s": medians[kind],
                    "samples": len(state["durations"].get(kind, [])),
                }
                for kind in (VERIFICATION, AGENT)
            },
            "reasons": FAILURE_REASONS,
        }

    def _verifier(self, state: State, now: datetime, enabled: bool) -> dict[str, Any]:
        beat = state.get("heartbeat") or {}
        at = _parse(beat.get("at"))
        age = (now - at).total_seconds() if at else None
        if not enabled:
            status = "disabled"
        elif at is None:
            status = "never_started"
        elif beat.get("stopped") or (age is not None and age > STALE_INTERVALS * self.heartbeat_s):
            status = "stopped"
        else:
            status = "running"
        return {
            "status": status,
            "heartbeat_at": beat.get("at"),
            "heartbeat_age_s": round(age, 3) if age is not None else None,
            "worker": beat.get("worker"),
            "heartbeat_s": self.heartbeat_s,
            "stale_after_s": STALE_INTERVALS * self.heartbeat_s,
            "concurrency": self.concurrency,
        }


def _busy(entry: Entry) -> bool:
    """Running, or claimed by a worker that is launching it (`ScoringQueue.dispatch`)."""
    return entry["state"] == RUNNING or bool(entry.get("launching"))


def _eta(entry: Entry, seconds: float | None, now: datetime) -> Entry:
    entry["eta_s"] = round(seconds, 3) if seconds is not None else None
    entry["eta_at"] = _stamp(now + timedelta(seconds=seconds)) if seconds is not None else None
    return entry
