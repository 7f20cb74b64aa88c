"""`PerReadModel`: state a slice keeps beside the read model's caches, one per read model."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

from agenthub.bucketsync.core.readmodel import ReadModel

T = TypeVar("T")


class PerReadModel(Generic[T]):
    """One `T` per read model, made on first use and dropped with it: state a slice keeps
    beside the caches (a sorted ranking, spans already read) without a field on the Hub."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._found: weakref.WeakKeyDictionary[ReadModel, T] = weakref.WeakKeyDictionary()

    def of(self, read_model: ReadModel) -> T:
        with self._lock:
            found = self._found.get(read_model)
            if found is None:
                found = self._found[read_model] = self._make()
            return found
