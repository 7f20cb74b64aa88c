"""Adapter selection: the store, identity, job runner, Redis bus, idempotency gate, Hub
budget and change feed that the settings choose (the composition root's one place for it).

The HF and Redis adapters are imported where they are chosen: their SDKs load only in the
deployments that use them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agenthub.bucketsync.core.idempotency import LocalGate, RunningGate
from agenthub.bucketsync.dashboard.signins import SignIns
from agenthub.bucketsync.identity.base import Identity, UserAdmin
from agenthub.bucketsync.identity.local import LocalIdentity, UsersDocument
from agenthub.bucketsync.runners.base import JobRunner
from agenthub.bucketsync.settings import BucketSyncSettings, OfflineSettings
from agenthub.bucketsync.storage.base import BucketStore, ChangeFeed, ConditionalStore
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import Clock

if TYPE_CHECKING:
    from agenthub.bucketsync.scaleout.bus import RedisBus
    from agenthub.bucketsync.scaleout.presence import RedisPresence
    from agenthub.bucketsync.storage.governor import HubGovernor
    from agenthub.bucketsync.storage.s3 import S3Config


def local_store(data_dir: Path) -> BucketStore:
    return LocalBucketStore(data_dir)


def hf_store(settings: OfflineSettings, governor: HubGovernor | None = None) -> BucketStore:
    from agenthub.bucketsync.storage.hf import HfBucketStore

    return HfBucketStore(
        token=settings.hf_token_value(),
        endpoint=settings.hf_endpoint,
        deadline_s=settings.hub_call_deadline_s,
        group_linger_s=settings.hub_group_linger_s,
        governor=governor,
    )


def hub_governor(settings: BucketSyncSettings) -> HubGovernor | None:
    """The HF token's request budget (HUB_BUDGET), counted in this process or, with a bus,
    in Redis for every worker; None when not set or not on hf."""
    limit = settings.hub_budget_limit
    if limit is None or settings.storage != "hf":
        return None
    from limits.storage import MemoryStorage, RedisStorage, Storage

    from agenthub.bucketsync.storage.governor import HubGovernor

    storage: Storage = (
        RedisStorage(
            settings.bus_url,
            key_prefix=f"{settings.bus_key_prefix}hub-budget",
            wrap_exceptions=True,
            socket_timeout=2,
            socket_connect_timeout=2,
        )
        if settings.bus_url
        else MemoryStorage()
    )
    return HubGovernor(
        limit=limit,
        window_s=settings.hub_budget_window_s,
        storage=storage,
        token=settings.hf_token_value(),
        shared=bool(settings.bus_url),
    )


def central_feed(
    settings: BucketSyncSettings, governor: HubGovernor | None, clock: Clock
) -> ChangeFeed | None:
    """The central bucket's change feed on hf (HUB_FEED), else None (TTL listing)."""
    if settings.storage != "hf" or not settings.hub_feed:
        return None
    from agenthub.bucketsync.storage.hffeed import HfChangeFeed

    return HfChangeFeed(
        bucket=settings.central_bucket,
        token=settings.hf_token_value(),
        endpoint=settings.hf_endpoint,
        governor=governor,
        clock=clock,
    )


def local_identity(settings: BucketSyncSettings) -> UserAdmin:
    """The token file in the data directory (which can also issue tokens)."""
    return LocalIdentity(settings.data_dir / "users.json", org=settings.org)


def local_adapters(settings: BucketSyncSettings) -> tuple[BucketStore, UserAdmin]:
    """Local mode's store and token file."""
    return local_store(settings.data_dir), local_identity(settings)


def s3_config(settings: OfflineSettings) -> S3Config:
    from agenthub.bucketsync.storage.s3 import S3Config

    secret = settings.s3_secret_access_key
    return S3Config(
        bucket=settings.s3_bucket,
        prefix=settings.s3_prefix,
        endpoint=settings.s3_endpoint,
        region=settings.s3_region,
        access_key_id=settings.s3_access_key_id,
        secret_access_key=secret.get_secret_value() if secret is not None else None,
        deadline_s=settings.s3_deadline_s,
    )


def s3_store(settings: OfflineSettings) -> BucketStore:
    from agenthub.bucketsync.storage.s3 import S3BucketStore

    return S3BucketStore(s3_config(settings))


def shared_identity(settings: BucketSyncSettings, store: BucketStore) -> UserAdmin:
    """The users document in the shared store (S3): every process on every host reads it."""
    from agenthub.bucketsync.identity.stored import StoredUsers

    assert isinstance(store, ConditionalStore)
    return LocalIdentity(StoredUsers(store), org=settings.org)


def users_document(settings: OfflineSettings) -> Path | UsersDocument:
    """Where `agenthub bucketsync users …` edits users: the shared store on s3, else the
    data directory's `users.json`."""
    if settings.storage == "s3":
        from agenthub.bucketsync.identity.stored import StoredUsers

        store = s3_store(settings)
        assert isinstance(store, ConditionalStore)
        return StoredUsers(store)
    return settings.data_dir / "users.json"


def default_adapters(
    settings: BucketSyncSettings, governor: HubGovernor | None = None
) -> tuple[BucketStore, Identity]:
    """The BucketStore and Identity adapters `BUCKETSYNC_STORAGE` selects (on hf, spending
    `governor`'s budget). On s3 the token file lives in the S3 bucket, so every host knows
    the same users."""
    if settings.storage == "s3":
        store = s3_store(settings)
        return store, shared_identity(settings, store)
    if settings.storage == "hf":
        from agenthub.bucketsync.identity.hf import HfIdentity

        identity = HfIdentity(
            admin_token=settings.hf_token_value(),
            endpoint=settings.hf_endpoint,
            deadline_s=settings.hub_call_deadline_s,
            governor=governor,
        )
        return hf_store(settings, governor), identity
    return local_adapters(settings)


def default_runner(settings: BucketSyncSettings, governor: HubGovernor | None = None) -> JobRunner:
    """The JobRunner `BUCKETSYNC_RUNNER` selects."""
    if settings.runner_kind == "hf":
        from agenthub.bucketsync.runners.hf import HfJobRunner

        return HfJobRunner(
            token=settings.hf_token_value(),
            namespace=settings.jobs_namespace,
            endpoint=settings.hf_endpoint,
            deadline_s=settings.hub_call_deadline_s,
            governor=governor,
        )
    from agenthub.bucketsync.runners.local import LocalJobRunner

    if settings.storage == "s3":
        return LocalJobRunner(settings.data_dir, s3=s3_config(settings))
    return LocalJobRunner(settings.data_dir)


def redis_bus(url: str, prefix: str) -> RedisBus:
    from agenthub.bucketsync.scaleout.bus import RedisBus

    return RedisBus(url, prefix)


def redis_presence(bus: RedisBus, prefix: str) -> RedisPresence:
    """Each worker's presence and parked waiters in Redis, for the others' reach forecasts."""
    import redis

    from agenthub.bucketsync.scaleout.presence import RedisPresence

    # Best effort (a forecast, never a write's outcome): short timeouts.
    client = redis.Redis.from_url(bus.url, socket_timeout=2, socket_connect_timeout=2)
    return RedisPresence(client, prefix, origin=bus.origin)


def redis_signins(bus: RedisBus, prefix: str, clock: Clock) -> SignIns:
    """The dashboard's sign-in states and sessions in Redis, shared by every worker."""
    import redis

    from agenthub.bucketsync.scaleout.signins import RedisSignIns

    return RedisSignIns(redis.Redis.from_url(bus.url, socket_timeout=5), prefix, clock)


def idempotency_gate(
    settings: BucketSyncSettings, bus: RedisBus | None, recover: Callable[[], object]
) -> RunningGate:
    """Where a running Idempotency-Key is held: this process, or Redis for many workers
    (where `recover` runs before a dead worker's key is taken over)."""
    if bus is None:
        return LocalGate()
    import redis

    from agenthub.bucketsync.scaleout.state import RedisGate

    return RedisGate(
        redis.Redis.from_url(bus.url, socket_timeout=5), settings.bus_key_prefix, recover=recover
    )
