"""`FilterMemo`: content-filtered key lists of one read-model folder, memoized per listing
version, and the `q=` search answered from the content cache's index."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agenthub.bucketsync.core.contentcache import ContentCache
from agenthub.bucketsync.storage.base import FileEntry


@dataclass(frozen=True)
class SearchKeys:
    """For `q=`: one listing's keys by content hash (built once per listing, so a query
    costs its matches), and the hashes not indexed when last looked (a shrinking list,
    empty once all are; looked up again in full after an eviction)."""

    paths: Mapping[str, str]
    entries: Mapping[str, FileEntry]
    by_hash: dict[str, list[str]]
    removals: int
    unindexed: list[str]


class MemoState(Protocol):
    """What a memo keeps in its folder's state (`readmodel._Folder`)."""

    lock: threading.Lock
    version: int
    filters: OrderedDict[tuple[Any, ...], tuple[int, list[str]]]
    search_keys: SearchKeys | None


class MemoModel(Protocol):
    """What a memo asks of the read model."""

    FILTER_MEMO_SIZE: int
    content: ContentCache

    def version(self, folder: str) -> int: ...

    def entries(self, folder: str) -> dict[str, FileEntry]: ...


class FilterMemo:
    """`ReadModel.filter_memo(folder)`: called as `memo(signature, compute)`."""

    def __init__(self, model: MemoModel, folder: str, state: MemoState) -> None:
        self.model = model
        self.folder = folder
        self.state = state

    def __call__(self, signature: tuple[Any, ...], compute: Callable[[], list[str]]) -> list[str]:
        model, state = self.model, self.state
        version = model.version(self.folder)
        with state.lock:
            hit = state.filters.get(signature)
            if hit is not None and hit[0] == version:
                state.filters.move_to_end(signature)
                return hit[1]
        keys = compute()
        with state.lock:
            if state.version == version:
                state.filters[signature] = (version, keys)
                state.filters.move_to_end(signature)
                while len(state.filters) > model.FILTER_MEMO_SIZE:
                    state.filters.popitem(last=False)
        return keys

    def search(
        self, query: str, keys: Sequence[str], paths: Mapping[str, str]
    ) -> tuple[list[str], list[str]] | None:
        """The keys among `keys` (each mapped to a path by `paths`) whose indexed record
        contains the lowered `query`, and those whose record is not indexed yet (to load
        and check), each sorted; None when the index cannot narrow the query. Costs the
        index's candidates, not the folder, once the folder is indexed."""
        model, state = self.model, self.state
        index = model.content.index
        entries = model.entries(self.folder)
        cached = state.search_keys
        # Entries are replaced, never changed in place: the same dict is the same contents.
        if cached is None or cached.paths is not paths or cached.entries is not entries:
            by_hash: dict[str, list[str]] = {}
            for key, path in paths.items():
                entry = entries.get(path)
                if entry is not None:
                    by_hash.setdefault(entry.content_hash, []).append(key)
            cached = SearchKeys(paths, entries, by_hash, -1, [])
        removals = index.removals  # read first: an eviction during the search recounts next time
        by_hash = cached.by_hash
        found = index.search(
            query, by_hash, cached.unindexed if cached.removals == removals else by_hash
        )
        if found is None:
            return None
        hashes, unindexed = found
        state.search_keys = SearchKeys(paths, entries, by_hash, removals, unindexed)
        matching = [key for h in hashes for key in by_hash[h]]
        unchecked = [key for h in unindexed for key in by_hash[h]]
        if len(keys) != len(paths):  # other filters came first
            kept = set(keys)
            matching = [key for key in matching if key in kept]
            unchecked = [key for key in unchecked if key in kept]
        return sorted(matching), sorted(unchecked)  # listing keys are sorted
