"""`ContentCache`: parsed documents by content hash, LRU-bounded by bytes, indexed for `q=`."""

from __future__ import annotations

import threading
from collections import OrderedDict

from agenthub.bucketsync.core.frontmatter import Document
from agenthub.bucketsync.core.search import SearchIndex


class ContentCache:
    """Parsed documents by content hash, evicting least-recently-used past `max_bytes`."""

    def __init__(self, max_bytes: int, *, index: SearchIndex | None = None) -> None:
        self.max_bytes = max_bytes
        self.index = index if index is not None else SearchIndex()
        self._items: OrderedDict[str, tuple[Document, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.evictions = 0

    def get(self, content_hash: str) -> Document | None:
        with self._lock:
            item = self._items.get(content_hash)
            if item is None:
                return None
            self._items.move_to_end(content_hash)
            return item[0]

    def put(self, content_hash: str, document: Document, size: int) -> None:
        with self._lock:
            if content_hash in self._items:
                self._items.move_to_end(content_hash)
                return
            self._items[content_hash] = (document, size)
            self._bytes += size
            self.index.add(content_hash, document.search_text)
            while self._bytes > self.max_bytes and len(self._items) > 1:
                old_hash, (_doc, old_size) = self._items.popitem(last=False)
                self._bytes -= old_size
                self.index.remove(old_hash)
                self.evictions += 1

    @property
    def total_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)
