"""`create_app(settings)`: the bucket-sync ASGI application — and the composition root.

This package is the only place adapters are chosen and the `Hub` is built, one concept a
module: `adapters` picks the store, identity, job runner, Redis bus, idempotency gate, Hub
budget and change feed from the settings; `hub` builds the `Hub` (`build_hub`), complete,
and scoring; `lifespan` starts and stops the background tasks; `http` stacks the
middleware and includes the routers; `workers` is what `serve --workers N` preloads and
each worker builds its app with. `create_app`, here, puts them together.
"""

from __future__ import annotations

from fastapi import FastAPI

from agenthub.apidocs import serve_docs
from agenthub.bucketsync.app.adapters import (
    central_feed,
    default_adapters,
    hub_governor,
    idempotency_gate,
    redis_bus,
    redis_signins,
)
from agenthub.bucketsync.app.http import include_routers, install_middleware
from agenthub.bucketsync.app.hub import build_hub, build_scoring
from agenthub.bucketsync.app.lifespan import lifespan
from agenthub.bucketsync.core import journal
from agenthub.bucketsync.core.idempotency import BucketIdempotency
from agenthub.bucketsync.core.notify import Notifier
from agenthub.bucketsync.core.timers import LoopTimer, Timer
from agenthub.bucketsync.dashboard import app as dashboard
from agenthub.bucketsync.dashboard.app import oauth_from_settings
from agenthub.bucketsync.dashboard.oauth import OAuthProvider
from agenthub.bucketsync.dashboard.routes import Branding
from agenthub.bucketsync.identity.base import Identity
from agenthub.bucketsync.runners.base import JobRunner
from agenthub.bucketsync.scoring.quota import QuotaLock
from agenthub.bucketsync.settings import BucketSyncSettings
from agenthub.bucketsync.storage.base import BucketStore
from agenthub.clock import Clock, SystemClock


# -- the application --------------------------------------------------------------------
def create_app(
    settings: BucketSyncSettings,
    *,
    store: BucketStore | None = None,
    identity: Identity | None = None,
    clock: Clock | None = None,
    notifier: Notifier | None = None,
    job_runner: JobRunner | None = None,
    quota_lock: QuotaLock | None = None,
    timer: Timer | None = None,
    oauth_provider: OAuthProvider | None = None,
) -> FastAPI:
    governor = hub_governor(settings)
    if store is None or identity is None:
        default_store, default_identity = default_adapters(settings, governor)
        store = store or default_store
        identity = identity or default_identity
    clock = clock or SystemClock()
    feed = central_feed(settings, governor, clock)
    bus = (
        redis_bus(settings.bus_url, settings.bus_key_prefix)
        if settings.bus_url and notifier is None
        else None
    )
    hub = build_hub(
        settings,
        store,
        identity,
        clock,
        notifier=notifier,
        timer=timer or LoopTimer(),
        bus=bus,
        budget=governor,
    )
    scoring = (
        build_scoring(hub, runner=job_runner, quota_lock=quota_lock)
        if settings.jobs_enabled
        else None
    )

    # A key held by a worker that died is released once recovery has recorded its answer.
    gate = idempotency_gate(
        settings, bus, recover=lambda: journal.recover(hub, gate, starting=False)
    )
    keys = BucketIdempotency(store, settings.audit_bucket, clock, gate)

    app = FastAPI(
        title="agenthub bucket-sync",
        version="1",
        lifespan=lifespan(hub, gate, feed=feed, bus=bus, scoring=scoring),
        docs_url=None,
        redoc_url=None,
    )
    serve_docs(app)
    app.state.hub = hub
    app.state.scoring = scoring
    install_middleware(app, settings, hub, keys)
    include_routers(app, settings)
    oauth = oauth_from_settings(
        settings,
        identity,
        clock,
        provider=oauth_provider,
        signins=redis_signins(bus, settings.bus_key_prefix, clock) if bus is not None else None,
    )
    dashboard.install(
        app,
        oauth=oauth,
        poll_s=settings.dashboard_poll_s,
        branding=Branding(settings.challenge_title, settings.challenge_tagline),
    )
    return app
