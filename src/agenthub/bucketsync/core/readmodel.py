"""The read model: every GET is served from per-folder caches of the central bucket.

- listing cache: one bucket listing per folder per `LISTING_TTL_S`, single-flight;
- a followed bucket (`follow`): while its change feed is live, the feed's batches patch
  the listings and they do not expire; otherwise the TTL holds (storage/hffeed.py);
- a request budget: near its limit a TTL refresh is shed (the listing served longer);
- content cache: parsed documents keyed by content hash, LRU-bounded by bytes, so
  byte-identical inbox copies share one entry; cold misses are fetched in one batch call;
- write-through overlay: the service's own writes are inserted synchronously, so
  read-after-write is exact regardless of the TTL;
- other workers' writes (Redis bus, `others_wrote`): patched in like a feed batch when the
  event says what changed, else the folder is listed again on its next read;
- cached-only reads (`cached_only`): inside that block a read that would touch the
  bucket (a listing past its TTL, a cold record) raises `NotCached` instead, so a caller
  on the event loop can answer from memory and hand only the rest to a thread.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agenthub.bucketsync.core.cachedonly import NotCached as NotCached
from agenthub.bucketsync.core.cachedonly import cached_only as cached_only
from agenthub.bucketsync.core.cachedonly import needs_bucket as needs_bucket
from agenthub.bucketsync.core.contentcache import ContentCache
from agenthub.bucketsync.core.feedpatch import patch
from agenthub.bucketsync.core.filtermemo import FilterMemo as FilterMemo
from agenthub.bucketsync.core.filtermemo import SearchKeys
from agenthub.bucketsync.core.frontmatter import Document, parse_lenient
from agenthub.bucketsync.storage.base import (
    HUB_PRIORITY,
    BucketStore,
    ChangeFeed,
    FileChange,
    FileEntry,
    RequestBudget,
)
from agenthub.clock import Clock

T = TypeVar("T")

# The folders the read model serves. Later features (results, channels, traces) register
# theirs here; each is listed recursively as one unit.
DEFAULT_FOLDERS = (
    "agents/",
    "message_board/",
    "inbox/",
    "broadcasts/",
    "results/",
    "channels/",
    "taskforces/",
    "traces/",
    "claims/",
    "acks/",
    "events/",
)


def folder_of(path: str) -> str:
    """The read-model folder a central path is listed in: its first segment."""
    return path.split("/", 1)[0] + "/"


@dataclass(frozen=True)
class Record:
    path: str
    content_hash: str
    size: int
    document: Document

    @property
    def frontmatter(self) -> dict[str, Any]:
        return self.document.frontmatter

    @property
    def body(self) -> str:
        return self.document.body

    @property
    def search_text(self) -> str:
        return self.document.search_text

    @property
    def filename(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass
class _Folder:
    lock: threading.Lock = field(default_factory=threading.Lock)
    entries: dict[str, FileEntry] | None = None
    loaded_at: float = float("-inf")
    version: int = 0
    overlay: dict[str, tuple[FileEntry, float]] = field(default_factory=dict)
    # Guards entries/version/overlay edits; never held across a bucket call, so the feed's
    # thread never waits for a listing in flight (`lock` is the listings' single flight).
    edit: threading.Lock = field(default_factory=threading.Lock)
    # Feed changes applied while a listing was in flight, replayed onto its result (the
    # listing may predate them); None when no listing is in flight.
    replay: list[FileChange] | None = None
    # Bumped by `invalidate` (another worker wrote here); a listing is current only if it
    # started after the latest bump. Written only by the event loop, read without the lock.
    invalidations: int = 0
    listed_at_invalidation: int = 0
    derived: dict[str, tuple[int, Any]] = field(default_factory=dict)
    filters: OrderedDict[tuple[Any, ...], tuple[int, list[str]]] = field(
        default_factory=OrderedDict
    )
    search_keys: SearchKeys | None = None


class ReadModel:
    def __init__(
        self,
        store: BucketStore,
        bucket: str,
        clock: Clock,
        *,
        ttl_s: float,
        content_cache_max_bytes: int,
        folders: Iterable[str] = DEFAULT_FOLDERS,
        budget: RequestBudget | None = None,
    ) -> None:
        self._store = store
        self._budget = budget
        self.feed: ChangeFeed | None = None
        self._reconciled_at = float("-inf")
        self.feed_counts = {"batches": 0, "changes": 0, "relists": 0, "reconciles": 0}
        self.bus_counts = {"patched": 0, "invalidated": 0}
        self._bucket = bucket
        self._clock = clock
        self._ttl = ttl_s
        self._folders = {name: _Folder() for name in folders}
        self.content = ContentCache(content_cache_max_bytes)
        self.listings = 0
        self.listings_by_folder: dict[str, int] = {}
        self._joined: OrderedDict[Hashable, tuple[tuple[int, ...], Any]] = OrderedDict()
        self._joined_lock = threading.Lock()

    def register_folder(self, folder: str) -> None:
        self._folders.setdefault(folder, _Folder())

    def _folder(self, folder: str) -> _Folder:
        try:
            return self._folders[folder]
        except KeyError:
            raise KeyError(f"folder {folder!r} is not registered with the read model") from None

    def entries(self, folder: str) -> dict[str, FileEntry]:
        """The folder's files by path, from the listing cache (refreshed once per TTL
        unless the bucket is followed)."""
        state = self._folder(folder)
        entries = state.entries
        if entries is not None and (self._current(state) or self._shed(state)):
            return entries
        needs_bucket(f"a listing of {folder}")
        with state.lock:
            # Single flight: whoever waited on the lock finds the fresh listing.
            if self._current(state) and state.entries is not None:
                return state.entries
            # Taken before listing: an invalidation landing mid-listing forces another.
            generation = state.invalidations
            started = self._clock.monotonic()
            with state.edit:
                state.replay = []
            priority = HUB_PRIORITY.set("read" if state.entries is None else "refresh")
            try:
                listed = self._store.list(self._bucket, folder, recursive=True)
            except BaseException:
                with state.edit:
                    state.replay = None
                raise
            finally:
                HUB_PRIORITY.reset(priority)
            self.listings += 1
            self.listings_by_folder[folder] = self.listings_by_folder.get(folder, 0) + 1
            fresh = {entry.path: entry for entry in listed if entry.path.startswith(folder)}
            with state.edit:
                for path, (entry, inserted_at) in list(state.overlay.items()):
                    if inserted_at >= started:
                        fresh[path] = entry
                    elif path in fresh or started - inserted_at > 2 * self._ttl:
                        del state.overlay[path]
                    else:
                        fresh[path] = entry
                replay, state.replay = state.replay or [], None
                if not patch(fresh, state.overlay, replay, self.content, self._clock.monotonic()):
                    state.invalidations += 1  # the listing stays unusable: list again
                state.entries = fresh
                state.loaded_at = started
                state.listed_at_invalidation = generation
                state.version += 1
            return fresh

    def _current(self, state: _Folder) -> bool:
        if state.listed_at_invalidation != state.invalidations:
            return False
        if self._clock.monotonic() - state.loaded_at < self._ttl:
            return True
        # Past the TTL, a listing the live feed keeps patched is still the bucket's state.
        return self.feed is not None and self.feed.live()

    def _shed(self, state: _Folder) -> bool:
        """A TTL refresh the budget sheds: serve the listing a while longer. Never one an
        invalidation asked for (another worker's write must be seen before its wake)."""
        return (
            self._budget is not None
            and state.listed_at_invalidation == state.invalidations
            and not self._budget.may_refresh()
        )

    # -- the change feed (a `FeedSink`) ----------------------------------------------------
    def follow(self, feed: ChangeFeed) -> None:
        """Apply `feed`'s changes from now on; listings outlive the TTL while it is live."""
        self.feed = feed
        feed.start(self)

    def changed(self, changes: list[FileChange]) -> None:
        """A feed batch: patch every listing it touches (a listing in flight gets it
        replayed onto its result)."""
        self._patch(changes, remote=False)

    def _patch(self, changes: list[FileChange], *, remote: bool) -> None:
        """Apply a feed batch or (`remote`) another worker's write to the listings."""
        counts = self.bus_counts if remote else self.feed_counts
        if not remote:
            self.feed_counts["batches"] += 1
            self.feed_counts["changes"] += len(changes)
        for folder, state in list(self._folders.items()):
            mine = [change for change in changes if change.path.startswith(folder)]
            if not mine:
                continue
            with state.edit:
                if remote:
                    # Our own write of a path is superseded, and never taken for this
                    # change's echo (`feedpatch._echo` maps by size, for the Hub's hash).
                    for change in mine:
                        state.overlay.pop(change.path, None)
                if state.replay is not None:
                    state.replay.extend(mine)
                if state.entries is None:
                    continue
                updated = dict(state.entries)
                if not patch(updated, state.overlay, mine, self.content, self._clock.monotonic()):
                    counts["invalidated" if remote else "relists"] += 1
                    state.invalidations += 1
                elif remote:
                    counts["patched"] += 1
                state.entries = updated  # replaced, then the version bumped (`derived`)
                state.version += 1

    def others_wrote(self, folders: frozenset[str], changes: list[FileChange] | None) -> None:
        """Another worker wrote to `folders` (Redis bus): patch their listings with
        `changes`, every file it wrote there. None (an older worker's event, a batch over
        the bus's cap): each folder is listed again on its next read, as is a folder the
        changes do not cover. A folder not listed here yet has nothing to patch."""
        if changes:
            self._patch(changes, remote=True)
            covered = {folder_of(change.path) for change in changes}
        else:
            covered = set()
        for folder in folders - covered:
            self.bus_counts["invalidated"] += 1
            self.invalidate(folder)

    def reconcile(self) -> None:
        """The feed lost track: every listing is taken again on its next read."""
        self.feed_counts["reconciles"] += 1
        self._reconciled_at = self._clock.monotonic()
        self.invalidate_all()

    def ready(self, *, from_scratch: bool) -> None:
        """The feed caught up. After a reconcile, a listing taken since then may have
        missed a change the feed did not replay (its resume instant unknown): those are
        taken again, and so is one in flight."""
        if from_scratch:
            for folder, state in list(self._folders.items()):
                in_flight = state.replay is not None
                if in_flight or (
                    state.entries is not None and state.loaded_at >= self._reconciled_at
                ):
                    self.invalidate(folder)

    def invalidate_all(self) -> None:
        for folder in list(self._folders):
            self.invalidate(folder)

    def version(self, folder: str) -> int:
        self.entries(folder)
        return self._folder(folder).version

    def derived(self, folder: str, key: str, build: Callable[[dict[str, FileEntry]], T]) -> T:
        """A value computed from the folder listing, rebuilt only when the listing changes.
        Tagged with the version read BEFORE the entries it is built from (writers replace
        the entries, then bump the version): a write landing meanwhile leaves a value
        tagged older than its listing, rebuilt on the next read, never one tagged newer."""
        version = self.version(folder)
        state = self._folder(folder)
        entries = state.entries
        assert entries is not None  # `version` listed the folder
        cached = state.derived.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]  # type: ignore[no-any-return]
        value = build(entries)
        state.derived[key] = (version, value)
        return value

    JOINED_SIZE = 4096

    def joined(self, key: Hashable, folders: Sequence[str], build: Callable[[], T]) -> T:
        """A value computed from several folders (one handle's inbox: its copies and every
        broadcast), rebuilt only when one of their listings changes; the JOINED_SIZE most
        recently used keys are kept. The versions are read before `build` runs, so a value
        built from a listing newer than them is only ever rebuilt, never served stale."""
        versions = tuple(self.version(folder) for folder in folders)
        with self._joined_lock:
            cached = self._joined.get(key)
            if cached is not None and cached[0] == versions:
                self._joined.move_to_end(key)
                return cached[1]  # type: ignore[no-any-return]
        value = build()
        with self._joined_lock:
            self._joined[key] = (versions, value)
            self._joined.move_to_end(key)
            while len(self._joined) > self.JOINED_SIZE:
                self._joined.popitem(last=False)
        return value

    FILTER_MEMO_SIZE = 64

    def filter_memo(self, folder: str) -> FilterMemo:
        """A memo for content-filtered key lists of `folder`, valid for one listing version
        and bounded to the most recent FILTER_MEMO_SIZE filters; it also answers a `q=`
        search from the search index, for the records the index holds."""
        return FilterMemo(self, folder, self._folder(folder))

    def records(self, paths: Iterable[str], folder: str) -> dict[str, Record]:
        """Parsed records for `paths` (those that exist); cold misses in one batch read."""
        entries = self.entries(folder)
        found: dict[str, Record] = {}
        missing: list[FileEntry] = []
        for path in paths:
            entry = entries.get(path)
            if entry is None:
                continue
            document = self.content.get(entry.content_hash)
            if document is None:
                missing.append(entry)
            else:
                found[path] = self._record(entry, document)
        if missing:
            needs_bucket(f"{len(missing)} record(s) of {folder}")
            priority = HUB_PRIORITY.set("read")
            try:
                data = self._store.read_many(self._bucket, [entry.path for entry in missing])
            finally:
                HUB_PRIORITY.reset(priority)
            for entry in missing:
                raw = data.get(entry.path)
                if raw is None:
                    continue  # deleted out of band since the listing; the next TTL drops it
                document = parse_lenient(raw)
                # Parsed text plus its lower-cased search copy: about twice the raw size.
                self.content.put(entry.content_hash, document, 2 * len(raw))
                found[entry.path] = self._record(entry, document)
        return found

    def record(self, path: str, folder: str) -> Record | None:
        return self.records([path], folder).get(path)

    def write_through(self, folder: str, entry: FileEntry, raw: bytes) -> None:
        """Insert a file the service just wrote, so the next read sees it at once."""
        state = self._folder(folder)
        if self.content.get(entry.content_hash) is None:  # a post's copies share their bytes
            self.content.put(entry.content_hash, parse_lenient(raw), 2 * len(raw))
        with state.lock, state.edit:
            state.overlay[entry.path] = (entry, self._clock.monotonic())
            if state.entries is not None:
                updated = dict(state.entries)
                updated[entry.path] = entry
                state.entries = updated
                state.version += 1

    def delete_through(self, folder: str, path: str) -> None:
        """Drop a file the service just deleted (channel unsubscribe, seed §12)."""
        state = self._folder(folder)
        with state.lock, state.edit:
            state.overlay.pop(path, None)
            if state.entries is not None and path in state.entries:
                updated = dict(state.entries)
                del updated[path]
                state.entries = updated
                state.version += 1

    def invalidate(self, folder: str) -> None:
        """Re-list `folder` on its next read: another worker wrote to it (Redis bus)."""
        # No lock: this runs on the event loop (the bus listener) and must not wait for a
        # listing in progress on another thread.
        self._folders.setdefault(folder, _Folder()).invalidations += 1

    @staticmethod
    def _record(entry: FileEntry, document: Document) -> Record:
        return Record(
            path=entry.path, content_hash=entry.content_hash, size=entry.size, document=document
        )
