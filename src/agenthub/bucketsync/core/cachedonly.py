"""Cached-only reads: inside `with cached_only():` a read that would touch the bucket (a
listing past its TTL, a cold record) raises `NotCached` instead, so a caller on the event
loop can answer from memory and hand only the rest to a thread."""

from __future__ import annotations

from contextvars import ContextVar


class NotCached(Exception):
    """A `cached_only` read needed the bucket (nothing was read or changed)."""


# Set only inside `cached_only()`; a worker thread started from there gets a copy of the
# context, so the block must end before handing the read to a thread (it always does).
_cached_only: ContextVar[bool] = ContextVar("bucketsync_read_model_cached_only", default=False)


class cached_only:  # a lower-case name: it reads as a function, `with cached_only():`
    """Reads in this block are answered from the caches or raise `NotCached`; pure
    computing (an index rebuilt from a cached listing, a filter) still runs. (A class, not
    a generator: every watched read on the loop enters one.)"""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = _cached_only.set(True)

    def __exit__(self, *_exc: object) -> None:
        _cached_only.reset(self._token)


def needs_bucket(what: str) -> None:
    """Raise `NotCached` inside `cached_only`: `what` would read the bucket (the read
    model's listings and records, a registration miss in `core.access`)."""
    if _cached_only.get():
        raise NotCached(what)
