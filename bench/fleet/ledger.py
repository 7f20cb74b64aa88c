"""What the fleet did and saw, written by many threads: every acknowledged write (with
whom it addresses), every item each watcher was delivered, every answer's status and when,
and the windows in which a service was down on purpose."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

KINDS_ADDRESSED = ("mention", "broadcast", "channel")


@dataclass(frozen=True)
class Write:
    """One acknowledged write. `addressed`: the handles whose `/v1/updates` must deliver
    `filename` exactly once (empty for results and State Hub sends)."""

    op: str  # the unique token carried in the body
    kind: str  # board | channel | broadcast | result | statehub
    agent: str
    filename: str
    addressed: frozenset[str]
    acked_at: float  # monotonic, when the 201 arrived
    latency_s: float  # the acknowledged attempt's round trip
    score: float | None = None
    mentioned: frozenset[str] = frozenset()  # the @-mentions the body carries
    mentions_delivered: tuple[str, ...] | None = None  # what the server answered, if known


@dataclass
class Watch:
    """One watcher's deliveries: filename -> times delivered, and when first."""

    handle: str
    counts: Counter[str] = field(default_factory=Counter)
    first_at: dict[str, float] = field(default_factory=dict)
    addressed_kind: set[str] = field(default_factory=set)  # filenames with a reason we check
    pages: int = 0


@dataclass(frozen=True)
class Window:
    service: str  # bucketsync | statehub | hubcore
    kind: str
    start: float
    end: float
    downtime_s: float


class Ledger:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.writes: list[Write] = []
        self.unacknowledged: list[tuple[str, str, str]] = []  # (op, kind, last error)
        self.watches: dict[str, Watch] = {}
        self.statuses: list[tuple[str, float, int, str]] = []  # (service, t, status, route)
        self.transport_errors: Counter[str] = Counter()
        self.windows: list[Window] = []
        self.open_windows: dict[str, float] = {}
        self.retries = 0
        self.replayed = 0
        self.answers_lost: list[tuple[str, str]] = []  # (op, answer): a retry not replayed
        # State Hub's retries answered "applied, but its answer was not recorded" and found
        # by listing. Its answer commits with the write, so a kill loses none: each one is a
        # failure of the replay check, kept apart to name the service in the summary.
        self.statehub_answers_lost: list[tuple[str, str]] = []

    def acked(self, write: Write) -> None:
        with self._lock:
            self.writes.append(write)

    def gave_up(self, op: str, kind: str, error: str) -> None:
        with self._lock:
            self.unacknowledged.append((op, kind, error))

    def answer(self, service: str, status: int, route: str) -> None:
        if status >= 500:
            with self._lock:
                self.statuses.append((service, time.monotonic(), status, route))

    def transport_error(self, service: str) -> None:
        with self._lock:
            self.transport_errors[service] += 1

    def retried(self) -> None:
        with self._lock:
            self.retries += 1

    def recovered(self, service: str, op: str, answer: str) -> None:
        with self._lock:
            lost = self.statehub_answers_lost if service == "statehub" else self.answers_lost
            lost.append((op, answer))

    def replay(self) -> None:
        with self._lock:
            self.replayed += 1

    def watch(self, handle: str) -> Watch:
        with self._lock:
            return self.watches.setdefault(handle, Watch(handle))

    def delivered(self, handle: str, filename: str, reasons: list[str]) -> None:
        now = time.monotonic()
        with self._lock:
            watch = self.watches[handle]
            watch.counts[filename] += 1
            watch.first_at.setdefault(filename, now)
            if any(r.split(":")[0] in KINDS_ADDRESSED for r in reasons):
                watch.addressed_kind.add(filename)

    def window_opened(self, service: str) -> float:
        now = time.monotonic()
        with self._lock:
            self.open_windows[service] = now
        return now

    def window_closed(self, service: str, kind: str, healthy_at: float, grace_s: float) -> None:
        with self._lock:
            start = self.open_windows.pop(service)
            self.windows.append(
                Window(service, kind, start, healthy_at + grace_s, healthy_at - start)
            )

    def in_window(self, service: str, t: float) -> bool:
        with self._lock:
            if service in self.open_windows and t >= self.open_windows[service]:
                return True
            return any(w.service == service and w.start <= t <= w.end for w in self.windows)

    def addressed_to(self, handle: str) -> set[str]:
        with self._lock:
            return {w.filename for w in self.writes if handle in w.addressed}

    def undelivered(self) -> int:
        """Addressed (watcher, item) pairs not delivered yet."""
        with self._lock:
            return sum(
                1
                for w in self.writes
                for handle in w.addressed
                if w.filename not in self.watches[handle].counts
            )
