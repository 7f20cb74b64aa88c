"""`create_app(settings)`: the State Hub ASGI application."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from sqlalchemy import text

from agenthub.apidocs import serve_docs
from agenthub.clock import Clock, SystemClock
from agenthub.db import make_engine, normalize_url
from agenthub.httperrors import ErrorBoundary, retry_safe
from agenthub.statehub import idempotency, migrate, source
from agenthub.statehub.api import errors, feed, health, messages
from agenthub.statehub.api.idempotency import IdempotencyKeys, answer_with_write
from agenthub.statehub.feed import FeedService
from agenthub.statehub.inbox import InboxService
from agenthub.statehub.instance import instance_label_in_force
from agenthub.statehub.readahead import ReadAhead
from agenthub.statehub.revisions import WAKE_CHANNEL
from agenthub.statehub.settings import StateHubSettings
from agenthub.statehub.snapshot import PagedSnapshots
from agenthub.statehub.store import Database
from agenthub.statehub.wake import FeedWake, NotificationsLost, listen, poll

log = logging.getLogger(__name__)

IDEMPOTENCY_SWEEP_S = 600


async def _wake_source(
    settings: StateHubSettings, db: Database, feed_service: FeedService, wake: FeedWake
) -> None:
    """LISTEN on PostgreSQL in `lock` mode, a watermark poll otherwise (see `wake`)."""
    interval = settings.wake_poll_interval_s
    if not db.sqlite and settings.revision_mode == "lock":
        url = normalize_url(settings.listen_url or settings.database_url)
        dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)

        def notify(channel: str, payload: str) -> None:
            with db.engine.connect() as conn:
                conn.execute(text("SELECT pg_notify(:c, :p)"), {"c": channel, "p": payload})
                conn.commit()

        try:
            await listen(dsn, WAKE_CHANNEL, wake, notify=notify)
        except NotificationsLost as exc:
            log.warning(
                "feed wakes: %s (a transaction pooler such as pgbouncer drops them); "
                "set STATEHUB_LISTEN_URL to a direct PostgreSQL connection. "
                "Polling every %.3f s instead.",
                exc,
                interval,
            )
    await poll(feed_service.servable_high_water, wake, interval)


async def _reap(paged: PagedSnapshots) -> None:
    """Release pinned snapshot images nobody has paged for a while."""
    while True:
        await asyncio.sleep(5)
        await asyncio.to_thread(paged.reap)


async def _sweep_idempotency(db: Database, clock: Clock) -> None:
    """Forget `Idempotency-Key` records past their 24 h."""
    while True:
        await asyncio.to_thread(idempotency.sweep, db.engine, clock.now())
        await asyncio.sleep(IDEMPOTENCY_SWEEP_S)


def create_app(settings: StateHubSettings, *, clock: Clock | None = None) -> FastAPI:
    clock = clock or SystemClock()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = make_engine(
            settings.database_url,
            pool_size=settings.pool_size,
            max_overflow=settings.pool_max_overflow,
        )
        tasks: list[asyncio.Task[None]] = []
        try:
            if settings.auto_migrate:
                migrate.upgrade(engine)
            db = Database(engine)
            db.before_write.append(idempotency.claim_in_transaction)
            db.transaction_required.append(idempotency.claim_pending)
            db.on_made.append(answer_with_write(messages.answer_of))
            app.state.db = db
            app.state.instance_label = instance_label_in_force(db, settings.instance_label)
            source.prepare(db, settings.revision_mode)
            # Two pages ahead on PostgreSQL, where a build mostly waits for the database
            # (two backends use both cores); one on SQLite, whose build holds the GIL.
            depth = 1 if db.sqlite else 2
            read_ahead = ReadAhead(depth=depth) if settings.feed_read_ahead else None
            app.state.feed = FeedService(db, clock, app.state.instance_label, read_ahead=read_ahead)
            # Before any write lands: a restored SQLite file must not reuse revisions unnoticed.
            app.state.feed.check_restore()
            app.state.paged_snapshots = PagedSnapshots(app.state.feed)
            app.state.inbox = InboxService(db, clock, news_ttl_days=settings.news_ttl_days)
            wake = FeedWake()
            wake.bind(asyncio.get_running_loop())
            db.after_commit.append(wake.bump_threadsafe)
            app.state.wake = wake
            tasks.append(asyncio.create_task(_wake_source(settings, db, app.state.feed, wake)))
            tasks.append(asyncio.create_task(_reap(app.state.paged_snapshots)))
            tasks.append(asyncio.create_task(_sweep_idempotency(db, clock)))
            yield
        finally:
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if hasattr(app.state, "paged_snapshots"):
                app.state.paged_snapshots.close_all()
            if hasattr(app.state, "feed") and app.state.feed.read_ahead is not None:
                app.state.feed.read_ahead.close()
            engine.dispose()

    app = FastAPI(
        title="agenthub State Hub",
        version="1",
        lifespan=lifespan,
        responses=errors.COMMON,
        docs_url=None,
        redoc_url=None,
    )
    serve_docs(app)
    errors.install(app)
    app.add_middleware(IdempotencyKeys, engine=lambda: app.state.db.engine, clock=clock)
    # Outermost, so a retried request passes the idempotency check again.
    app.add_middleware(ErrorBoundary, render=errors.unexpected, retry=retry_safe)
    app.include_router(health.router)
    # The feed's fixed paths must match before `/messages/{id}`.
    app.include_router(feed.router)
    app.include_router(messages.router)
    return app
