"""`create_app(settings)`: the bucket-sync ASGI application — and the composition root.

This is the only module that chooses adapters (storage, identity, job runner, the Redis
scale-out) and the only place a `Hub` is built, complete, in `build_hub`.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI

from agenthub.apidocs import serve_docs
from agenthub.bucketsync.api import agentsetup, coordination, errors, live, local, routes
from agenthub.bucketsync.api import lineage as lineage_routes
from agenthub.bucketsync.api import phases as phase_routes
from agenthub.bucketsync.api import scoring as scoring_routes
from agenthub.bucketsync.api import taskforces as taskforce_routes
from agenthub.bucketsync.api import traces as traces_routes
from agenthub.bucketsync.api.idempotency import IdempotencyKeys
from agenthub.bucketsync.api.ratelimit import RateLimitHeaders
from agenthub.bucketsync.api.stamping import SettleStamps
from agenthub.bucketsync.api.viewer import note_viewer
from agenthub.bucketsync.app.adapters import (
    central_feed,
    default_adapters,
    hub_governor,
    idempotency_gate,
    redis_bus,
    redis_signins,
)
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

log = logging.getLogger(__name__)


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
    errors.install(app)
    # Inside the idempotency gate (added before it): a request's stamps are settled before
    # its key is freed.
    app.add_middleware(SettleStamps, stamps=hub.stamps)
    app.add_middleware(IdempotencyKeys, keys=keys)
    # Outside the idempotency replay: a replayed answer took no token, so it has no headers.
    app.add_middleware(RateLimitHeaders)
    app.add_middleware(phase_routes.PhaseEvents, hub=hub)
    app.add_middleware(note_viewer)  # who reads: staged disclosure shows authors their own
    # Added last, so outermost: an oversized body is refused before anything reads it.
    app.add_middleware(
        errors.BodyLimit,
        max_bytes=settings.max_request_bytes,
        max_upload_bytes=settings.max_upload_bytes,
    )
    app.include_router(live.router)
    app.include_router(routes.router)
    app.include_router(traces_routes.router)
    app.include_router(coordination.router)
    app.include_router(taskforce_routes.router)
    app.include_router(agentsetup.router)
    app.include_router(scoring_routes.router)
    app.include_router(phase_routes.router)
    app.include_router(lineage_routes.router)
    if settings.serves_buckets:
        app.include_router(local.router)
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
