"""`create_app(settings)`: the State Hub ASGI application."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from agenthub.clock import Clock, SystemClock
from agenthub.db import make_engine
from agenthub.statehub import migrate, source
from agenthub.statehub.api import errors, feed, health, messages
from agenthub.statehub.feed import FeedService
from agenthub.statehub.inbox import InboxService
from agenthub.statehub.instance import stored_instance_label
from agenthub.statehub.settings import StateHubSettings
from agenthub.statehub.store import Database


def create_app(settings: StateHubSettings, *, clock: Clock | None = None) -> FastAPI:
    clock = clock or SystemClock()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = make_engine(settings.database_url)
        try:
            if settings.auto_migrate:
                migrate.upgrade(engine)
            db = Database(engine)
            app.state.db = db
            app.state.instance_label = settings.instance_label or stored_instance_label(db)
            source.prepare(db, settings.revision_mode)
            app.state.feed = FeedService(db, clock, app.state.instance_label)
            app.state.inbox = InboxService(db, clock, news_ttl_days=settings.news_ttl_days)
            yield
        finally:
            engine.dispose()

    app = FastAPI(title="agenthub State Hub", version="1", lifespan=lifespan)
    errors.install(app)
    app.include_router(health.router)
    # The feed's fixed paths must match before `/messages/{id}`.
    app.include_router(feed.router)
    app.include_router(messages.router)
    return app
