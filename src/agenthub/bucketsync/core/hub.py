"""`Hub`: the wiring every service module shares (settings, ports, caches, limiters).

`app.hub.build_hub` is the one place a Hub is built, with every field chosen up front."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from agenthub.bucketsync.core.audit import AuditLog
from agenthub.bucketsync.core.dedup import DedupClaims
from agenthub.bucketsync.core.limiter import CompoundLimiter, Rate, RateLimiter
from agenthub.bucketsync.core.locks import Locks
from agenthub.bucketsync.core.longpoll import LongPoll
from agenthub.bucketsync.core.naming import SourceRef, parse_source
from agenthub.bucketsync.core.notify import FolderListener, Notifier
from agenthub.bucketsync.core.readmodel import ReadModel, folder_of
from agenthub.bucketsync.core.stamps import StampIssuer
from agenthub.bucketsync.errors import InvalidPath, PartialWrite, StorageUnavailable
from agenthub.bucketsync.identity.base import Identity
from agenthub.bucketsync.settings import BucketSyncSettings
from agenthub.bucketsync.storage.base import (
    Batch,
    BucketStore,
    FileChange,
    FileEntry,
    RequestBudget,
)
from agenthub.clock import Clock

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CallerInfo:
    """Request metadata the audit log may record (two-org mode only)."""

    ip: str | None = None
    user_agent: str | None = None


@dataclass
class Limiters:
    source_writes: RateLimiter
    raw_messages: RateLimiter
    registration: RateLimiter

    @classmethod
    def standard(cls, clock: Clock) -> Limiters:
        return cls.build(lambda name, rates: CompoundLimiter(name, rates, clock))

    @classmethod
    def build(cls, make: Callable[[str, list[Rate]], RateLimiter]) -> Limiters:
        """The seed §5 limits, each made by `make(name, rates)` (in-process or Redis)."""
        return cls(
            # Seed §5: "20/min burst, 60/min sustained", keyed by source bucket.
            source_writes=make("bucket-source write", [Rate(20, 60.0), Rate(60, 60.0)]),
            # 5/min and 30/hr per agent_id; the hourly bucket refills 1 token per 2 min.
            raw_messages=make("raw message", [Rate(5, 60.0), Rate(30, 3600.0)]),
            registration=make("registration", [Rate(3, 60.0)]),
        )


@dataclass
class Hub:
    settings: BucketSyncSettings
    store: BucketStore
    identity: Identity
    clock: Clock
    read_model: ReadModel
    audit: AuditLog
    limiters: Limiters
    dedup: DedupClaims
    stamps: StampIssuer
    notifier: Notifier | None
    longpoll: LongPoll | None  # None offline (CLI passes): nobody parks there
    locks: Locks  # e.g. the job-quota sequence
    # Told which read-model folders a write touched, and what it wrote there (the Redis
    # bus tells the other workers, who patch their listings with it).
    folder_listeners: list[FolderListener]
    # Called with each promoted result's filename after its write (the verifier's trigger,
    # subscribed when scoring is assembled); listeners must return at once and never raise.
    result_listeners: list[Callable[[str], None]] = field(default_factory=list)
    repairs_pending: int = 0
    # Every post answers with its `reach`; False only for bench/coordination_reach.py's
    # control run (the same post without the forecast).
    reach_forecast: bool = True
    # The HF token's request budget (`/v1/healthz` shows it); None when not governed.
    budget: RequestBudget | None = None
    # Shared files (the verification index, the quota ledger, the scoring queue) are edited
    # by compare-and-swap instead of under the named locks (`core.shared`): S3, where
    # processes on several machines share the bucket with no lock between them.
    swaps: bool = False

    @property
    def central(self) -> str:
        return self.settings.central_bucket

    def wakes_held(self) -> AbstractContextManager[None]:
        """The long-poll registry's `wakes_held` (nothing to hold offline)."""
        return self.longpoll.registry.wakes_held() if self.longpoll is not None else nullcontext()

    def check_agent_bucket(self, agent_id: str) -> str:
        """The agent's scratch bucket, refusing ids whose bucket would be the central or
        audit bucket (e.g. `main-bucket` under the default CENTRAL_BUCKET)."""
        bucket = self.settings.scratch_bucket(agent_id)
        if bucket in (self.settings.central_bucket, self.settings.audit_bucket):
            raise InvalidPath(
                f"agent_id {agent_id!r} is reserved: its bucket is the service's {bucket}",
                hint="pick another agent_id",
            )
        return bucket

    def parse_source(self, uri: str) -> SourceRef:
        """Parse a scratch-bucket source URI (seed §4), never the central/audit bucket."""
        source = parse_source(uri, org=self.settings.org, collab_slug=self.settings.collab_slug)
        self.check_agent_bucket(source.agent_id)
        return source

    def write_central(self, adds: list[tuple[str, bytes]]) -> list[FileEntry]:
        """Write files to the central bucket in ONE batch, in the given order (callers put
        the file that makes a write visible last), and insert them into the read model.

        HF batches are not transactional. If everything but some leading files landed, the
        write counts as committed: the missing files are retried once, and if they still
        fail the loss is logged and counted (`backfill-inbox` repairs inbox copies). If the
        last file failed, nothing became visible and the error propagates (503)."""
        try:
            return self._write_central(adds)
        finally:
            # Visible now (write-through) or never: either way no stream waits for them.
            self.stamps.settle([path.rsplit("/", 1)[-1] for path, _data in adds])

    def _write_central(self, adds: list[tuple[str, bytes]]) -> list[FileEntry]:
        try:
            self.store.write_batch(self.central, Batch(adds=list(adds)))
            failed: set[str] = set()
        except PartialWrite as exc:
            failed = set(exc.failed)
            if not adds or adds[-1][0] in failed:
                raise
            retry = [(path, data) for path, data in adds if path in failed]
            try:
                self.store.write_batch(self.central, Batch(adds=retry))
                failed = set()
            except StorageUnavailable as again:
                self.repairs_pending += len(failed)
                log.error(
                    "committed write left %d files unwritten: %s (%s)",
                    len(failed),
                    sorted(failed),
                    again.message,
                )
        return self.wrote_central([(path, data) for path, data in adds if path not in failed])

    def wrote_central(self, adds: list[tuple[str, bytes]]) -> list[FileEntry]:
        """Insert files just written to the central bucket into the read model, and tell
        the folder listeners what changed."""
        written, folders = [], set()
        for path, data in adds:
            digest = hashlib.sha256(data).hexdigest()
            entry = FileEntry(path=path, size=len(data), content_hash=digest)
            folder = folder_of(path)
            self.read_model.register_folder(folder)
            self.read_model.write_through(folder, entry, data)
            written.append(entry)
            folders.add(folder)
        self.announce_folders(
            folders, [FileChange(e.path, size=e.size, content_hash=e.content_hash) for e in written]
        )
        return written

    def announce_folders(self, folders: set[str], changes: list[FileChange] | None = None) -> None:
        """Tell the folder listeners a write touched `folders`; `changes`, when given, is
        every file it added, updated or deleted there (else the folders are re-listed)."""
        if folders:
            for listener in self.folder_listeners:
                listener(frozenset(folders), changes)
