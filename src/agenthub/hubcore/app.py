"""`create_app(settings)`: the hub-core ASGI application."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from agenthub.apidocs import serve_docs
from agenthub.clock import Clock, SystemClock
from agenthub.hubcore import migrate
from agenthub.hubcore.api import errors, health, projections
from agenthub.hubcore.auth import OperatorToken
from agenthub.hubcore.errors import ConfigurationError
from agenthub.hubcore.feedclient import HttpFeedSource
from agenthub.hubcore.follower import Follower, FollowOptions
from agenthub.hubcore.followlock import sole_follower
from agenthub.hubcore.freshness import FreshnessReport
from agenthub.hubcore.projection import InboxProjection
from agenthub.hubcore.settings import HubCoreSettings
from agenthub.hubcore.store import Database


def check_settings(settings: HubCoreSettings) -> None:
    """Refuse to start a server that would serve reads without a credential or an agent."""
    if not settings.inbox_reads:
        return
    token = settings.operator_token.get_secret_value() if settings.operator_token else ""
    if not token:
        raise ConfigurationError(
            "HUB_CORE_STATEHUB_INBOX_READS=1 but HUB_CORE_OPERATOR_TOKEN is not set",
            hint="configure the operator bearer token, or leave the pilot off",
        )
    if not settings.inbox_agent or settings.inbox_agent == "*":
        raise ConfigurationError(
            "HUB_CORE_STATEHUB_INBOX_READS=1 needs HUB_CORE_STATEHUB_INBOX_AGENT to name one agent",
            hint="name the one agent whose inbox the pilot serves, e.g. state-hub (not '*')",
        )


def follow_options(settings: HubCoreSettings) -> FollowOptions:
    return FollowOptions(
        limit=settings.follow_limit,
        wait_s=settings.follow_wait_s,
        snapshot_page_size=settings.snapshot_page_size,
        max_lag_s=settings.max_lag_s,
    )


def create_app(settings: HubCoreSettings, *, clock: Clock | None = None) -> FastAPI:
    check_settings(settings)
    clock = clock or SystemClock()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = settings.engine()
        following = settings.statehub_url is not None
        task: asyncio.Task[None] | None = None
        source: HttpFeedSource | None = None
        held = contextlib.ExitStack()
        try:
            if settings.auto_migrate:
                migrate.upgrade(engine)
            db = Database(engine)
            app.state.db = db
            app.state.projection = None
            app.state.freshness = FreshnessReport(
                db, clock, following=following, max_lag_s=settings.max_lag_s
            )
            if settings.inbox_reads:
                assert settings.operator_token is not None and settings.inbox_agent is not None
                app.state.operator_token = OperatorToken(settings.operator_token.get_secret_value())
                app.state.projection = InboxProjection(
                    db,
                    clock,
                    agent=settings.inbox_agent,
                    following=following,
                    max_lag_s=settings.max_lag_s,
                )
            if settings.statehub_url is not None:
                held.enter_context(sole_follower(engine))
                source = HttpFeedSource(settings.statehub_url)
                app.state.follower = Follower(db, source, clock, follow_options(settings))
                task = asyncio.create_task(app.state.follower.run())
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if source is not None:
                await source.aclose()
            held.close()
            engine.dispose()

    app = FastAPI(
        title="agenthub hub-core",
        version="1",
        lifespan=lifespan,
        responses=errors.COMMON,
        docs_url=None,
        redoc_url=None,
    )
    serve_docs(app)
    errors.install(app)
    app.include_router(health.router)
    app.include_router(projections.router)
    return app
