"""The app's lifespan: what runs before the first request (the buckets, the change feed,
journal recovery) and which background tasks start and stop with it (the store sweep, the
bus, scoring, the phase boundaries' announcer, the presence map)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI

from agenthub.bucketsync.core import journal
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.core.idempotency import RunningGate
from agenthub.bucketsync.phases.timer import announce_at_boundaries
from agenthub.bucketsync.scoring.assembly import Scoring
from agenthub.bucketsync.settings import SettingsError
from agenthub.bucketsync.storage.base import BucketInfo, BucketStore, ChangeFeed
from agenthub.bucketsync.storage.local import LocalBucketStore

if TYPE_CHECKING:
    from agenthub.bucketsync.scaleout.bus import RedisBus

log = logging.getLogger(__name__)

SERVICE_USER = "bucket-sync"


def lifespan(
    hub: Hub,
    gate: RunningGate,
    *,
    feed: ChangeFeed | None,
    bus: RedisBus | None,
    scoring: Scoring | None,
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The lifespan of an app serving `hub`, with `gate` holding its running keys."""

    @asynccontextmanager
    async def run(app: FastAPI) -> AsyncIterator[None]:
        # Before serving only what a wrong answer depends on: the buckets, and the journal
        # (no orphan inbox copy, every landed post's answer recorded and its key free).
        prepare_buckets(hub)
        if feed is not None:
            hub.read_model.follow(feed)  # reads stay correct before it is live (the TTL)
        if bus is not None:
            bus.check()  # recovery's lock is in Redis: say first that the bus is down
        journal.recover(hub, gate)
        # Garbage collection can run beside the first requests (it leaves young files).
        sweeper = threading.Thread(target=sweep_store, args=(hub.store,), name="sweep")
        sweeper.start()
        if bus is not None:
            await bus.start()
        if scoring is not None:
            scoring.start()
        boundaries = asyncio.create_task(announce_at_boundaries(hub), name="phase boundaries")
        try:
            yield
        finally:
            boundaries.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await boundaries
            if feed is not None:
                feed.stop()
            sweeper.join()
            if scoring is not None:
                scoring.shutdown()
            if bus is not None:
                await bus.stop()
            if hub.longpoll is not None:
                hub.longpoll.registry.presence_map.close()

    return run


def sweep_store(store: BucketStore) -> None:
    """At start, the local store drops what a crash or an earlier version left: temp files
    of dead processes and objects no bucket file links to."""
    if isinstance(store, LocalBucketStore):
        report = store.sweep()
        if report.objects_removed or report.temps_removed:
            log.info(
                "swept %d unreferenced objects and %d temp files",
                report.objects_removed,
                report.temps_removed,
            )


def _created_by_service_or_admin(hub: Hub, info: BucketInfo) -> bool:
    if info.creator == SERVICE_USER:
        return True
    org = info.id.split("/", 1)[0]
    return info.creator is not None and hub.identity.org_role(org, info.creator) == "admin"


def prepare_buckets(hub: Hub) -> None:
    """Local mode creates the central and audit buckets (the service owns them); on HF the
    bootstrap creates them and a missing one is reported, not created. A local bucket an
    org admin created first (`agenthub buckets create`, as on the Hub) is accepted."""
    for bucket, private in (
        (hub.settings.central_bucket, False),
        (hub.settings.audit_bucket, True),
    ):
        info = hub.store.info(bucket)
        if info is not None:
            if hub.settings.serves_buckets and not _created_by_service_or_admin(hub, info):
                # Whoever created it could write the "central record" themselves.
                raise SettingsError(
                    f"bucket {bucket} exists but was created by {info.creator!r}, neither "
                    "bucket-sync nor an admin of its org; choose another "
                    "CENTRAL_BUCKET/AUDIT_BUCKET or remove it"
                )
            continue
        if hub.settings.serves_buckets:
            hub.store.create(bucket, creator=SERVICE_USER, private=private)
        else:
            log.error("bucket %s does not exist; writes to it will fail", bucket)
