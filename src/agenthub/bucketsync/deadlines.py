"""Deadlines that nest across layers: code holding something with a lease (a Redis lock,
an idempotency key) opens `within(lease)`, and every backend call made inside it (the hf
adapters' `HubCalls`) ends by then, so no Hub call outlives the lease it runs under.

A context variable, so it follows the request's thread and nothing else; the innermost,
earliest deadline wins.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager

_UNTIL: contextvars.ContextVar[float | None] = contextvars.ContextVar("deadline", default=None)


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """Bound every call that honours `remaining()` to end within `seconds` from now."""
    until = time.monotonic() + seconds
    outer = _UNTIL.get()
    token = _UNTIL.set(until if outer is None else min(outer, until))
    try:
        yield
    finally:
        _UNTIL.reset(token)


def remaining() -> float | None:
    """Seconds left before the innermost deadline (may be ≤ 0), or None outside any."""
    until = _UNTIL.get()
    return None if until is None else until - time.monotonic()
