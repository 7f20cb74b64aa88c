"""Feed read-ahead: the next cursor page built while its reader takes this one.

A follower catching up asks for page after page, each from the previous page's
`next_cursor`. Served one by one, State Hub builds a page while the reader waits,
then idles while the reader parses it. After a page that says `has_more`, the next
page's changes are built in the background, in a consistent read of their own,
and kept beside that read's `Position.fingerprint`.

A request takes them only when its own read finds the same fingerprint. Under
`lock` (and SQLite's single writer) every commit draws a revision above all those
committed before it, so an equal fingerprint (each revision table's highest
revision, the compaction horizon, the epoch) means no transaction committed
between the two reads, and the changes are the ones the request would build.
Under `xid` a transaction can commit below the highest visible revision, so
there is no fingerprint and nothing is read ahead.

One page is built ahead at a time (one worker thread): a second catching-up
reader is served as before, and a page nobody asks for is replaced by the next.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

log = logging.getLogger(__name__)

# A request waits this long for the page being built for it; the build is one
# page statement, so past this the database is in trouble and the request asks itself.
TAKE_WAIT_S = 10.0


@dataclass(frozen=True)
class AheadPage:
    """A cursor page's changes, built ahead, and the state they were read from."""

    fingerprint: Hashable
    cut: int
    has_more: bool
    count: int
    changes: bytes


class ReadAhead:
    """At most one page built ahead, kept under the cursor it answers."""

    def __init__(self, *, take_wait_s: float = TAKE_WAIT_S) -> None:
        self.take_wait_s = take_wait_s
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="feed-read-ahead")
        self._lock = threading.Lock()
        self._pending: tuple[Hashable, Future[AheadPage | None]] | None = None

    def schedule(self, key: Hashable, build: Callable[[], AheadPage | None]) -> None:
        """Build the page `key` names, unless a build is still running (one at a time)."""
        with self._lock:
            if self._pending is not None and not self._pending[1].done():
                return
            try:
                self._pending = (key, self._executor.submit(build))
            except RuntimeError:  # shut down: the server is stopping
                self._pending = None

    def take(self, key: Hashable) -> AheadPage | None:
        """The page built for `key` (waiting for a build in progress), once; else None.
        The caller still compares its fingerprint with what its own read finds."""
        with self._lock:
            if self._pending is None or self._pending[0] != key:
                return None
            _key, future = self._pending
            self._pending = None
        try:
            return future.result(timeout=self.take_wait_s)
        except FutureTimeout:
            log.warning(
                "feed read-ahead took over %.0fs; building the page again", self.take_wait_s
            )
        except Exception:  # the request's own read meets the same failure and reports it
            log.debug("feed read-ahead failed", exc_info=True)
        return None

    def idle(self, timeout: float | None = None) -> None:
        """Wait until no build is running (a test writing after a build; a clean stop)."""
        with self._lock:
            pending = self._pending
        if pending is not None:
            with contextlib.suppress(Exception):
                pending[1].result(timeout=timeout)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
