"""Server stamps and the streams' watermark.

Stamps: every `{stamp}_{agent}` filename this worker mints is later than any it minted
before (whoever the author), so two promotions in one millisecond never collide and the
next stamp is never below `floor`.

Watermark: a stamp is issued before its write becomes visible (`Hub.write_central` settles
it once the files are in the read model, or failed). A multi-folder stream serves an item
only below the watermark — the oldest stamp issued and not yet visible, or the lowest
stamp that can still be issued — so an item can never become visible below a cursor a
watcher already holds (the State Hub feed's xid bound, for files). With several workers
each one's low mark crosses the bus (`scaleout.bus`): a mark is a promise ("everything of
mine below this is visible, and I issue nothing below it"), so a stale one is only
conservative. Nothing holds it forever: a stamp issued inside `settling()` (every request
runs inside one) is settled when that ends, whether its write landed, failed or was never
made (a request refused after its stamp); any other unsettled stamp counts for `lease_s`,
and a worker heard from no more for `peer_lease_s`.
"""

from __future__ import annotations

import bisect
import contextvars
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime

from agenthub.bucketsync.core.naming import STAMP_LEN, parse_stamped_filename, stamp_from_ms
from agenthub.clock import Clock

# A write to the Hub may take seconds; one still unsettled after this is treated as failed.
STAMP_LEASE_S = 30.0
# A worker that published no mark for this long is gone (killed): it holds nothing back.
PEER_LEASE_S = 2.0
# How far ahead of the clock a held item's stamp may pull this worker's floor.
CATCH_UP_AHEAD_S = 5.0
_STAMP_RE = re.compile(r"\d{8}-\d{6}-\d{3}")
# Above every stamp: the watermark when it is switched off.
UNBOUNDED = "~"
# The stamps issued inside the current `settling()` scope (a request).
_scope: contextvars.ContextVar[list[tuple[str, str]] | None] = contextvars.ContextVar(
    "stamps_issued", default=None
)


class StampIssuer:
    def __init__(
        self,
        clock: Clock,
        *,
        shared_claim: Callable[[str, str], bool] | None = None,
        lease_s: float = STAMP_LEASE_S,
        peer_lease_s: float = PEER_LEASE_S,
    ) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._last_ms = -1
        # With several workers: claim (author, stamp) in a shared store; False = taken.
        self.shared_claim = shared_claim
        self.lease_s = lease_s
        self.peer_lease_s = peer_lease_s
        self._unsettled: dict[tuple[str, str], float] = {}  # (stamp, author) → lease end
        self._peers: dict[str, tuple[str, float]] = {}  # worker → (its mark, heard until)
        # Told when the watermark may have moved up (the long-poll's held waiters).
        self.advance_listeners: list[Callable[[], None]] = []
        # Publishes this worker's mark now (the bus, with several workers).
        self.announce: Callable[[], None] | None = None
        # False (BUCKETSYNC_STREAM_WATERMARK=false, to measure its cost): nothing is held.
        self.bounded = True

    def issue(self, author: str, *, taken: Callable[[str], bool] = lambda _s: False) -> str:
        """A stamp for `author` later than any this worker issued, skipping stamps `taken`
        reports as used (files written before a restart); unsettled until its write ends."""
        with self._lock:
            candidate = max(self._now_ms(), self._last_ms + 1)
            while taken(stamp_from_ms(candidate)) or (
                self.shared_claim is not None
                and not self.shared_claim(author, stamp_from_ms(candidate))
            ):
                candidate += 1
            self._last_ms = candidate
            stamp = stamp_from_ms(candidate)
            self._unsettled[(stamp, author)] = self._clock.monotonic() + self.lease_s
        scope = _scope.get()
        if scope is not None:
            scope.append((stamp, author))
        return stamp

    @contextmanager
    def settling(self) -> Iterator[None]:
        """Settle, when the block ends, every stamp issued inside it that its write has
        not: the write failed, or never came (a request refused after stamping). Without
        it such a stamp held every stream back for `lease_s` (issue 31)."""
        issued: list[tuple[str, str]] = []
        token = _scope.set(issued)
        try:
            yield
        finally:
            _scope.reset(token)
            if issued:
                self._settle(issued)

    def settle(self, filenames: list[str]) -> None:
        """The writes of these filenames are visible (or failed): they hold nothing back."""
        self._settle(
            [parsed for name in filenames if (parsed := parse_stamped_filename(name)) is not None]
        )

    def _settle(self, keys: list[tuple[str, str]]) -> None:
        with self._lock:
            moved = [key for key in keys if self._unsettled.pop(key, None) is not None]
        if moved:
            self._advanced()

    def mark(self) -> str:
        """This worker's low mark: its oldest unsettled stamp, or the lowest it can still
        issue (which it then never goes below)."""
        with self._lock:
            return self._mark()

    def _mark(self) -> str:
        now = self._clock.monotonic()
        for key in [key for key, until in self._unsettled.items() if until <= now]:
            del self._unsettled[key]  # its write never settled: failed, not pending
        floor_ms = max(self._now_ms(), self._last_ms + 1)
        self._last_ms = floor_ms - 1  # a promise: the clock stepping back does not break it
        floor = stamp_from_ms(floor_ms)
        return min((stamp for stamp, _author in self._unsettled), default=floor)

    def catch_up(self, key: str) -> bool:
        """A stream holds items up to `key` (a filename, written by another worker or
        process) behind this worker's floor: promise to issue nothing at or below its stamp
        (and announce it on the bus), so the hold ends now, or in one bus round trip, not
        when the clock passes it. True if the floor moved (the page is worth reading
        again). A stamp more than CATCH_UP_AHEAD_S ahead of the clock is not caught up to
        (it would drag every later stamp with it): it waits for the clock."""
        stamp = key[:STAMP_LEN]
        if not _STAMP_RE.fullmatch(stamp):
            return False
        moment = datetime.strptime(stamp, "%Y%m%d-%H%M%S-%f").replace(tzinfo=UTC)
        ms = int(moment.timestamp() * 1000)
        with self._lock:
            if ms <= self._last_ms or ms > self._now_ms() + CATCH_UP_AHEAD_S * 1000:
                return False
            self._last_ms = ms
        if self.announce is not None:
            self.announce()
        return True

    def observe(self, worker: str, mark: str) -> None:
        """`worker`'s low mark as the bus delivered it (ours too, echoed: a worker we have
        not heard from yet published before it, so its marks arrive before our echo)."""
        with self._lock:
            before = self._peers.get(worker)
            self._peers[worker] = (mark, self._clock.monotonic() + self.peer_lease_s)
        if before is None or mark > before[0]:
            self._advanced()

    def watermark(self) -> str:
        """Items whose stamp sorts at or above this wait: read it BEFORE the listings."""
        if not self.bounded:
            return UNBOUNDED
        with self._lock:
            now = self._clock.monotonic()
            low = self._mark()
            for worker, (mark, until) in list(self._peers.items()):
                if until <= now:
                    del self._peers[worker]
                elif mark < low:
                    low = mark
            return low

    def _advanced(self) -> None:
        for listener in list(self.advance_listeners):
            listener()

    def _now_ms(self) -> int:
        return int(self._clock.now().timestamp() * 1000)


def visible(keys: Sequence[str], held: str) -> Sequence[str]:
    """Sorted `keys` without the server-stamped ones at or above the watermark `held` (a
    view handing back a cursor or a count "since"); names without our stamp are never
    held, as in `listing.page`."""
    cut = bisect.bisect_left(keys, held)
    if cut == len(keys):
        return keys
    return [*keys[:cut], *(k for k in keys[cut:] if parse_stamped_filename(k) is None)]
