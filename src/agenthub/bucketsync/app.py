"""`create_app(settings)`: the bucket-sync ASGI application."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from agenthub.bucketsync.api import errors, local, routes
from agenthub.bucketsync.api import traces as traces_routes
from agenthub.bucketsync.context import Hub, build_hub
from agenthub.bucketsync.identity import Identity, LocalIdentity
from agenthub.bucketsync.jobrunner import JobRunner
from agenthub.bucketsync.localstore import LocalBucketStore
from agenthub.bucketsync.notify import Notifier
from agenthub.bucketsync.quota import QuotaLock
from agenthub.bucketsync.scoring import build_scoring
from agenthub.bucketsync.settings import BucketSyncSettings, SettingsError
from agenthub.bucketsync.storage import BucketStore
from agenthub.clock import Clock, SystemClock

log = logging.getLogger("agenthub.bucketsync")

SERVICE_USER = "bucket-sync"


def default_adapters(settings: BucketSyncSettings) -> tuple[BucketStore, Identity]:
    """The BucketStore and Identity adapters `BUCKETSYNC_STORAGE` selects."""
    if settings.storage == "hf":
        from agenthub.bucketsync.hfidentity import HfIdentity
        from agenthub.bucketsync.hfstore import HfBucketStore

        return HfBucketStore(token=settings.hf_token), HfIdentity(admin_token=settings.hf_token)
    return (
        LocalBucketStore(settings.data_dir),
        LocalIdentity(settings.data_dir / "users.json", org=settings.org),
    )


def create_app(
    settings: BucketSyncSettings,
    *,
    store: BucketStore | None = None,
    identity: Identity | None = None,
    clock: Clock | None = None,
    notifier: Notifier | None = None,
    job_runner: JobRunner | None = None,
    quota_lock: QuotaLock | None = None,
) -> FastAPI:
    if store is None or identity is None:
        default_store, default_identity = default_adapters(settings)
        store = store or default_store
        identity = identity or default_identity
    hub = build_hub(settings, store, identity, clock or SystemClock(), notifier=notifier)
    scoring = (
        build_scoring(hub, runner=job_runner, quota_lock=quota_lock)
        if settings.jobs_enabled
        else None
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        prepare_buckets(hub)
        yield
        if scoring is not None:
            scoring.shutdown()

    app = FastAPI(title="agenthub bucket-sync", version="1", lifespan=lifespan)
    app.state.hub = hub
    app.state.scoring = scoring
    errors.install(app)
    app.add_middleware(errors.BodyLimit, max_bytes=settings.max_request_bytes)
    app.include_router(routes.router)
    app.include_router(traces_routes.router)
    if settings.storage == "local":
        app.include_router(local.router)
    return app


def prepare_buckets(hub: Hub) -> None:
    """Local mode creates the central and audit buckets (the service owns them); on HF the
    bootstrap creates them and a missing one is reported, not created."""
    for bucket, private in (
        (hub.settings.central_bucket, False),
        (hub.settings.audit_bucket, True),
    ):
        info = hub.store.info(bucket)
        if info is not None:
            if hub.settings.storage == "local" and info.creator != SERVICE_USER:
                # Whoever created it could write the "central record" themselves.
                raise SettingsError(
                    f"bucket {bucket} exists but was created by {info.creator!r}, not by "
                    "bucket-sync; choose another CENTRAL_BUCKET/AUDIT_BUCKET or remove it"
                )
            continue
        if hub.settings.storage == "local":
            hub.store.create(bucket, creator=SERVICE_USER, private=private)
        else:
            log.error("bucket %s does not exist; writes to it will fail", bucket)
