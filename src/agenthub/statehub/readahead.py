"""Feed read-ahead: the next cursor pages built while their reader takes this one.

A follower catching up asks for page after page, each from the previous page's
`next_cursor`. Served one by one, State Hub builds a page while the reader waits,
then idles while the reader parses it. After a page that says `has_more`, the next
page's changes are built in the background, in a consistent read of their own,
and kept beside that read's `Position.fingerprint`; a build that finds more after
its own page schedules the one after it, up to `depth` pages ahead.

A request takes them only when its own read finds the same fingerprint. Under
`lock` (and SQLite's single writer) every commit draws a revision above all those
committed before it, so an equal fingerprint (each revision table's highest
revision, the compaction horizon, the epoch) means no transaction committed
between the two reads, and the changes are the ones the request would build.
Under `xid` a transaction can commit below the highest visible revision, so
there is no fingerprint and nothing is read ahead.

At most `depth` pages are held, built or being built; a page nobody asked for
within `STALE_S` of being built gives its place to the next reader's.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

log = logging.getLogger(__name__)

# A request waits this long for the page being built for it; the build is one
# page statement, so past this the database is in trouble and the request asks itself.
TAKE_WAIT_S = 10.0
# A reader asks for its next page within milliseconds of the last (it parses one
# page); a page built ahead and not taken for this long has lost its reader.
STALE_S = 1.0


@dataclass(frozen=True)
class AheadPage:
    """A cursor page's changes, built ahead, and the state they were read from."""

    fingerprint: Hashable
    cut: int
    has_more: bool
    count: int
    changes: bytes


@dataclass
class _Held:
    future: Future[AheadPage | None]
    built_at: float | None = None  # when the build ended (monotonic)


class ReadAhead:
    """Up to `depth` pages built ahead, each kept under the cursor it answers."""

    def __init__(
        self,
        *,
        depth: int = 1,
        take_wait_s: float = TAKE_WAIT_S,
        stale_s: float = STALE_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.depth = depth
        self.take_wait_s = take_wait_s
        self.stale_s = stale_s
        self._monotonic = monotonic
        self._executor = ThreadPoolExecutor(max_workers=depth, thread_name_prefix="feed-ahead")
        self._lock = threading.Lock()
        self._held: dict[Hashable, _Held] = {}

    def schedule(self, key: Hashable, build: Callable[[], AheadPage | None]) -> None:
        """Build the page `key` names, unless it is held already or `depth` pages are."""
        with self._lock:
            if key in self._held:
                return
            now = self._monotonic()
            for stale in [
                k
                for k, held in self._held.items()
                if held.built_at is not None and now - held.built_at > self.stale_s
            ]:
                del self._held[stale]
            if len(self._held) >= self.depth:
                return
            try:
                future = self._executor.submit(build)
            except RuntimeError:  # shut down: the server is stopping
                return
            held = self._held[key] = _Held(future)
        future.add_done_callback(lambda _done: self._built(held))

    def _built(self, held: _Held) -> None:
        with self._lock:
            held.built_at = self._monotonic()

    def take(self, key: Hashable) -> AheadPage | None:
        """The page built for `key` (waiting for a build in progress), once; else None.
        The caller still compares its fingerprint with what its own read finds."""
        with self._lock:
            held = self._held.pop(key, None)
        if held is None:
            return None
        try:
            return held.future.result(timeout=self.take_wait_s)
        except FutureTimeout:
            log.warning(
                "feed read-ahead took over %.0fs; building the page again", self.take_wait_s
            )
        except Exception:  # the request's own read meets the same failure and reports it
            log.debug("feed read-ahead failed", exc_info=True)
        return None

    def idle(self, timeout: float | None = None) -> None:
        """Wait until no build is running (a test writing after a build; a clean stop)."""
        while True:  # a build may schedule the page after its own
            with self._lock:
                running = [held.future for held in self._held.values() if not held.future.done()]
            if not running:
                return
            for future in running:
                with contextlib.suppress(Exception):
                    future.result(timeout=timeout)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
