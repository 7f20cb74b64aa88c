"""`build_hub`: the only place a `Hub` is built, complete (its read model, limiters, dedup,
stamps, locks and long-poll registry, shared through Redis when there is a bus), and
`build_scoring`, the jobs service and verifier on the chosen runner."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from agenthub.bucketsync.app.adapters import default_runner, redis_presence
from agenthub.bucketsync.core.audit import AuditLog
from agenthub.bucketsync.core.dedup import DedupClaims, PromotionDedup
from agenthub.bucketsync.core.hub import Hub, Limiters
from agenthub.bucketsync.core.locks import FileFences, Leased, LocalLocks, Locks
from agenthub.bucketsync.core.longpoll import LongPoll
from agenthub.bucketsync.core.notify import FolderListener, InProcessNotifier, Notifier
from agenthub.bucketsync.core.reach import NoPresenceMap, PresenceMap
from agenthub.bucketsync.core.readmodel import ReadModel
from agenthub.bucketsync.core.stamps import StampIssuer
from agenthub.bucketsync.core.timers import Timer
from agenthub.bucketsync.core.waiters import WaiterRegistry
from agenthub.bucketsync.identity.base import Identity
from agenthub.bucketsync.runners.base import JobRunner
from agenthub.bucketsync.scoring.assembly import Scoring, assemble_scoring
from agenthub.bucketsync.scoring.quota import QuotaLock
from agenthub.bucketsync.settings import BucketSyncSettings
from agenthub.bucketsync.storage.base import BucketStore, ConditionalStore
from agenthub.clock import Clock

if TYPE_CHECKING:
    from agenthub.bucketsync.scaleout.bus import RedisBus
    from agenthub.bucketsync.storage.governor import HubGovernor

LOCK_LEASE_S = 120.0  # a crashed worker's Redis lock frees itself after this


def build_hub(
    settings: BucketSyncSettings,
    store: BucketStore,
    identity: Identity,
    clock: Clock,
    *,
    notifier: Notifier | None = None,
    timer: Timer | None = None,
    bus: RedisBus | None = None,
    budget: HubGovernor | None = None,
) -> Hub:
    """The Hub, complete. With `bus`, it is the notifier and the limiters, dedup, stamps
    and locks are shared through Redis (bucketsync.md, "Scaling out"); with `timer` (a
    server), the long-poll registry is fed by the notifier (seed §13)."""
    chosen: Notifier = bus if bus is not None else (notifier or InProcessNotifier())
    read_model = ReadModel(
        store,
        settings.central_bucket,
        clock,
        ttl_s=settings.listing_ttl_s,
        content_cache_max_bytes=settings.content_cache_max_bytes,
        budget=budget,
    )
    limiters = Limiters.standard(clock)
    dedup: DedupClaims = PromotionDedup(settings.dedup_lru_size)
    stamps = StampIssuer(clock)
    locks: Locks = LocalLocks(_lock_directory(settings))
    folder_listeners: list[FolderListener] = []
    presence: PresenceMap = NoPresenceMap()
    if bus is not None:
        limiters, dedup, stamps, locks = _shared_state(settings, bus, clock)
        presence = redis_presence(bus, settings.bus_key_prefix)
        folder_listeners.append(bus.folders_changed)
        bus.on_folders_changed(read_model.others_wrote)
    longpoll = _longpoll(settings, clock, chosen, timer, presence) if timer is not None else None
    if longpoll is not None:
        # A watch held behind the watermark is rung when it moves (core.stamps).
        stamps.advance_listeners.append(longpoll.registry.watermark_moved)
    if bus is not None:
        bus.on_mark(stamps.observe, stamps.mark)
        stamps.announce = bus.announce
    stamps.bounded = settings.stream_watermark
    return Hub(
        settings=settings,
        store=store,
        identity=identity,
        clock=clock,
        read_model=read_model,
        audit=AuditLog(store, settings.audit_bucket, clock, two_org=settings.audit_two_org),
        limiters=limiters,
        dedup=dedup,
        stamps=stamps,
        notifier=chosen,
        longpoll=longpoll,
        locks=locks,
        folder_listeners=folder_listeners,
        budget=budget,
        # On S3 the processes sharing the bucket may share no lock (no Redis, other
        # machines): shared files are edited by conditional writes (core.shared).
        swaps=settings.storage == "s3" and isinstance(store, ConditionalStore),
    )


def _longpoll(
    settings: BucketSyncSettings,
    clock: Clock,
    notifier: Notifier,
    timer: Timer,
    presence: PresenceMap,
) -> LongPoll:
    """The waiter registry, fed by the notifier (seed §13), reporting to `presence`."""
    registry = WaiterRegistry(
        clock,
        max_per_owner=settings.longpoll_max_waiters_per_owner,
        max_total=settings.longpoll_max_waiters_total,
        spread_threshold=settings.longpoll_wake_spread_threshold,
        spread_s=settings.longpoll_wake_spread_s,
        presence_map=presence,
    )
    notifier.subscribe(registry.deliver)
    return LongPoll(registry, timer, clock, max_wait_s=settings.longpoll_max_wait_s)


def _shared_state(
    settings: BucketSyncSettings, bus: RedisBus, clock: Clock
) -> tuple[Limiters, DedupClaims, StampIssuer, Locks]:
    """Many workers: limiters, dedup, stamps and locks live in Redis."""
    import redis
    from limits.storage import RedisStorage

    from agenthub.bucketsync.scaleout.state import (
        RedisDedup,
        RedisLimiter,
        RedisLocks,
        RedisStampClaims,
    )

    prefix = settings.bus_key_prefix
    storage = RedisStorage(bus.url, key_prefix=f"{prefix}limits")
    client = redis.Redis.from_url(bus.url, socket_timeout=5)
    return (
        Limiters.build(lambda name, rates: RedisLimiter(name, rates, storage)),
        RedisDedup(client, prefix),
        StampIssuer(clock, shared_claim=RedisStampClaims(client, prefix).claim),
        Leased(
            RedisLocks(client, prefix, lease_s=LOCK_LEASE_S, fences=_fences(settings)),
            lease_s=LOCK_LEASE_S,
        ),
    )


def _lock_directory(settings: BucketSyncSettings) -> Path | None:
    """Where the local store's lock and fence files live: beside its buckets, so every
    process writing that directory sees them (a Hub store has none: Redis and the lease's
    bound serialize its writers, see core.locks)."""
    return settings.data_dir / "locks" if settings.storage == "local" else None


def _fences(settings: BucketSyncSettings) -> FileFences | None:
    directory = _lock_directory(settings)
    return FileFences(directory) if directory is not None else None


def build_scoring(
    hub: Hub,
    *,
    runner: JobRunner | None = None,
    quota_lock: QuotaLock | None = None,
    listen: bool = True,
) -> Scoring:
    """The jobs service and verifier on the configured runner; `listen=False` (offline
    reconcile) does not hook the verifier onto result promotion."""
    from agenthub.bucketsync.storage.governor import HubGovernor

    governor = hub.budget if isinstance(hub.budget, HubGovernor) else None
    return assemble_scoring(
        hub,
        runner or default_runner(hub.settings, governor),
        quota_lock=quota_lock,
        listen=listen,
    )
