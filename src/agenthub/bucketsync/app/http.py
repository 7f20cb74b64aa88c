"""The HTTP stack of the bucket-sync app: its middleware, in the order that matters, and the
routers it serves."""

from __future__ import annotations

from fastapi import FastAPI

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
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.idempotency import BucketIdempotency
from agenthub.bucketsync.settings import BucketSyncSettings


def install_middleware(
    app: FastAPI, settings: BucketSyncSettings, hub: Hub, keys: BucketIdempotency
) -> None:
    """The error handlers and the middleware, innermost first (each added wraps the ones
    before it)."""
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


def include_routers(app: FastAPI, settings: BucketSyncSettings) -> None:
    """The API's routers; the bucket routes only where bucket-sync serves the buckets."""
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
