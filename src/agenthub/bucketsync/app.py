"""`create_app(settings)`: the bucket-sync ASGI application."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI

from agenthub.bucketsync.api import errors, live, local, routes
from agenthub.bucketsync.api import traces as traces_routes
from agenthub.bucketsync.core.hub import Hub, build_hub
from agenthub.bucketsync.core.longpoll import LongPoll, LoopTimer, Timer, WaiterRegistry
from agenthub.bucketsync.core.notify import Notifier
from agenthub.bucketsync.dashboard import app as dashboard
from agenthub.bucketsync.dashboard.app import oauth_from_settings
from agenthub.bucketsync.dashboard.oauth import OAuthProvider
from agenthub.bucketsync.identity.base import Identity
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.runners.base import JobRunner
from agenthub.bucketsync.scoring.assembly import build_scoring
from agenthub.bucketsync.scoring.quota import QuotaLock
from agenthub.bucketsync.settings import BucketSyncSettings, SettingsError
from agenthub.bucketsync.storage.base import BucketStore
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import Clock, SystemClock

if TYPE_CHECKING:
    from agenthub.bucketsync.scaleout.bus import RedisBus

log = logging.getLogger("agenthub.bucketsync")

SERVICE_USER = "bucket-sync"


def default_adapters(settings: BucketSyncSettings) -> tuple[BucketStore, Identity]:
    """The BucketStore and Identity adapters `BUCKETSYNC_STORAGE` selects."""
    if settings.storage == "hf":
        from agenthub.bucketsync.identity.hf import HfIdentity
        from agenthub.bucketsync.storage.hf import HfBucketStore

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
    timer: Timer | None = None,
    oauth_provider: OAuthProvider | None = None,
) -> FastAPI:
    if store is None or identity is None:
        default_store, default_identity = default_adapters(settings)
        store = store or default_store
        identity = identity or default_identity
    clock = clock or SystemClock()
    bus = None
    if settings.bus_url and notifier is None:
        from agenthub.bucketsync.scaleout.bus import RedisBus

        bus = RedisBus(settings.bus_url, settings.bus_key_prefix)
        notifier = bus
    hub = build_hub(settings, store, identity, clock, notifier=notifier)
    scoring = (
        build_scoring(hub, runner=job_runner, quota_lock=quota_lock)
        if settings.jobs_enabled
        else None
    )
    install_longpoll(hub, timer or LoopTimer())
    if bus is not None:
        share_state_through(hub, bus)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        prepare_buckets(hub)
        if bus is not None:
            bus.check()
            await bus.start()
        try:
            yield
        finally:
            if scoring is not None:
                scoring.shutdown()
            if bus is not None:
                await bus.stop()

    app = FastAPI(title="agenthub bucket-sync", version="1", lifespan=lifespan)
    app.state.hub = hub
    app.state.scoring = scoring
    errors.install(app)
    app.add_middleware(errors.BodyLimit, max_bytes=settings.max_request_bytes)
    app.include_router(live.router)
    app.include_router(routes.router)
    app.include_router(traces_routes.router)
    if settings.storage == "local":
        app.include_router(local.router)
    oauth = oauth_from_settings(settings, identity, clock, provider=oauth_provider)
    dashboard.install(app, oauth=oauth, poll_s=settings.dashboard_poll_s)
    return app


def app_from_environment() -> FastAPI:
    """The uvicorn factory for `serve --workers N` (each worker reads the environment)."""
    from agenthub.bucketsync.settings import load_settings

    return create_app(load_settings())


def install_longpoll(hub: Hub, timer: Timer) -> None:
    """The waiter registry, fed by the notifier (seed §13)."""
    s = hub.settings
    registry = WaiterRegistry(
        hub.clock,
        max_per_owner=s.longpoll_max_waiters_per_owner,
        max_total=s.longpoll_max_waiters_total,
        spread_threshold=s.longpoll_wake_spread_threshold,
        spread_s=s.longpoll_wake_spread_s,
    )
    hub.longpoll = LongPoll(registry, timer, hub.clock, max_wait_s=s.longpoll_max_wait_s)
    if hub.notifier is not None:
        hub.notifier.subscribe(registry.deliver)


def share_state_through(hub: Hub, bus: RedisBus) -> None:
    """Many workers: limiters, dedup, stamps and locks move to Redis; writes invalidate
    other workers' read-model folders (bucketsync.md, "Scaling out")."""
    import redis
    from limits.storage import RedisStorage

    from agenthub.bucketsync.core.hub import Limiters
    from agenthub.bucketsync.scaleout.state import (
        RedisDedup,
        RedisLimiter,
        RedisLocks,
        RedisStampClaims,
    )

    prefix = hub.settings.bus_key_prefix
    storage = RedisStorage(bus.url, key_prefix=f"{prefix}limits")
    hub.limiters = Limiters.build(lambda name, rates: RedisLimiter(name, rates, storage))
    client = redis.Redis.from_url(bus.url, socket_timeout=5)
    hub.dedup = RedisDedup(client, prefix)
    hub.stamps.shared_claim = RedisStampClaims(client, prefix).claim
    hub.locks = RedisLocks(client, prefix)
    hub.folder_listeners.append(bus.folders_changed)

    def invalidate(folders: frozenset[str]) -> None:
        for folder in folders:
            hub.read_model.invalidate(folder)

    bus.on_folders_changed(invalidate)


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
