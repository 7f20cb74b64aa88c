"""Waking long-polling feed readers when a revision may have been committed.

A wake only signals; the reader re-reads the feed (it never trusts the wake's
content, so a duplicate or spurious wake costs one query and a lost one is
impossible: the reader takes the generation *before* it checks).

Sources, chosen from the database and revision mode:

* in-process: every State Hub write transaction bumps after commit;
* PostgreSQL `lock` mode: `LISTEN statehub_inbox_feed` — the revision function
  notifies once per transaction, so writes from any worker or from `psql` wake.
  A transaction pooler (pgbouncer) hands a LISTEN's server connection to other
  clients and never forwards its notifications, so the first connection proves
  delivery (a NOTIFY sent through the pooled engine must arrive); if it does not,
  the wake falls back to the poll below with a warning naming the direct URL setting;
* a watermark poll otherwise (PostgreSQL `xid` mode, where a NOTIFY would
  serialize commits — measured at about a third of plain throughput — and
  where a commit is servable only once older transactions end; SQLite, to see
  writes from other programs).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger(__name__)


class FeedWake:
    """A generation counter readers park on.

    Writers move the generation at once, from any thread; the event loop is
    woken only while someone is parked. Waking it from a write means writing to
    its self-pipe, which hands the GIL to the loop thread in the middle of the
    request, and that handoff was a third of a SQLite send with nobody waiting.
    The two sides order their steps so that one always sees the other: a writer
    moves the generation, then looks for parked readers; a reader counts itself
    parked, then looks at the generation.
    """

    def __init__(self) -> None:
        self.generation = 0
        self.parked = 0
        self._event = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def bump(self) -> None:
        """Wake everyone parked (event-loop thread only)."""
        self.generation += 1
        self._release()

    def bump_threadsafe(self) -> None:
        """Wake from any thread (the write path runs in the threadpool)."""
        self.generation += 1
        if not self.parked:
            return
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # loop shutting down
                loop.call_soon_threadsafe(self._release)

    def _release(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait_past(self, generation: int, timeout: float) -> bool:
        """Park until the generation moves past `generation` or `timeout` passes."""
        self.parked += 1
        try:
            if self.generation != generation:
                return True
            await asyncio.wait_for(self._event.wait(), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            self.parked -= 1


# How long the first LISTEN connection waits for its own probe before deciding that
# notifications do not reach it (a direct connection delivers one in milliseconds).
PROBE_TIMEOUT_S = 3.0


class NotificationsLost(Exception):
    """A NOTIFY sent through the pooled connections never reached the LISTEN connection."""


async def listen(
    dsn: str,
    channel: str,
    wake: FeedWake,
    notify: Callable[[str, str], None] | None = None,
    probe_timeout: float = PROBE_TIMEOUT_S,
) -> None:
    """PostgreSQL LISTEN loop; reconnects with backoff and wakes readers after a
    reconnect (a notification may have been missed while disconnected).

    With `notify` (sends `NOTIFY channel, payload` the way writers do), the first
    connection first checks that a notification arrives; `NotificationsLost` says it
    did not (a transaction pooler between here and the database)."""
    import psycopg

    delay = 0.5
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(
                dsn, autocommit=True, prepare_threshold=None
            ) as conn:
                await conn.execute(f'LISTEN "{channel}"')
                if notify is not None:
                    if not await _delivered(conn, channel, notify, probe_timeout):
                        with contextlib.suppress(psycopg.Error):
                            await conn.execute("UNLISTEN *")  # best effort, pooled
                        raise NotificationsLost(f"no notification arrived over {_shown(dsn)}")
                    notify = None
                wake.bump()
                delay = 0.5
                async for _notify in conn.notifies():
                    wake.bump()
        except (asyncio.CancelledError, NotificationsLost):
            raise
        except Exception as exc:  # the database went away: retry, never die
            log.warning("feed LISTEN connection lost (%s); retrying in %.1fs", exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)


async def _delivered(
    conn: psycopg.AsyncConnection[Any],
    channel: str,
    notify: Callable[[str, str], None],
    timeout: float,
) -> bool:
    token = f"probe:{uuid.uuid4().hex}"
    await asyncio.to_thread(notify, channel, token)
    async for received in conn.notifies(timeout=timeout):
        if received.payload == token:
            return True
    return False


def _shown(dsn: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(dsn).render_as_string(hide_password=True)


async def poll(probe: Callable[[], int], wake: FeedWake, interval: float) -> None:
    """Compare the servable high water every `interval` while a reader is parked,
    and wake on a change.

    Nobody parked, nothing is probed: a reader takes the generation before it
    checks, so a change landing between its check and its park is still caught
    by the first probe after it parks, which compares against the last value
    probed (possibly long ago: at worst one spurious wake, never a missed one).
    Writes from this process wake at once through `bump_threadsafe`.
    """
    last: int | None = None
    while True:
        if wake.parked or last is None:
            try:
                current = await asyncio.to_thread(probe)
            except Exception as exc:
                log.warning("feed wake poll failed: %s", exc)
            else:
                if last is not None and current != last:
                    wake.bump()
                last = current
        await asyncio.sleep(interval)
