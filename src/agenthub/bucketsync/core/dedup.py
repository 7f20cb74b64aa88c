"""Promoted-hash dedup: SHA256(source bytes) + dest folder → the filename it became."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

from agenthub.bucketsync.errors import AlreadyPromoted

_PENDING = ""


class DedupClaims(Protocol):
    """In-process (`PromotionDedup`) or shared across workers (`RedisDedup`)."""

    def claim(self, data: bytes, folder: str) -> AbstractContextManager[list[str]]: ...


class PromotionDedup:
    """An LRU of promoted (hash, folder) keys. `claim` reserves a key for the duration of a
    write so two concurrent promotions of the same bytes cannot both land."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, str] = OrderedDict()

    @staticmethod
    def key(data: bytes, folder: str) -> str:
        return f"{hashlib.sha256(data).hexdigest()}:{folder}"

    @contextmanager
    def claim(self, data: bytes, folder: str) -> Iterator[list[str]]:
        """Yield a one-element list the caller fills with the written filename."""
        key = self.key(data, folder)
        with self._lock:
            existing = self._seen.get(key)
            if existing is not None:
                self._seen.move_to_end(key)
                if existing == _PENDING:
                    raise AlreadyPromoted(
                        "the same source is being promoted right now",
                        filename="",
                        hint="retry in a moment to get the filename",
                    )
                raise AlreadyPromoted(
                    f"this source was already promoted as {existing}",
                    filename=existing,
                    hint=f"existing filename: {existing}",
                )
            self._seen[key] = _PENDING
        result: list[str] = []
        try:
            yield result
        except BaseException:
            with self._lock:
                self._seen.pop(key, None)
            raise
        with self._lock:
            if result:
                self._seen[key] = result[0]
                self._seen.move_to_end(key)
                while len(self._seen) > self._size:
                    self._seen.popitem(last=False)
            else:
                self._seen.pop(key, None)
