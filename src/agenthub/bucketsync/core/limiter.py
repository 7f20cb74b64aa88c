"""In-process token-bucket rate limiters (restart-safe by loss), with time injected, and
the standing a request leaves a limiter in (`Quota`, noted for the X-RateLimit-* headers)."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

from agenthub.bucketsync.errors import RateLimited
from agenthub.clock import Clock


@dataclass(frozen=True)
class Rate:
    """`capacity` tokens, refilled continuously at `capacity` per `period_s`."""

    capacity: int
    period_s: float

    @property
    def per_second(self) -> float:
        return self.capacity / self.period_s


NOISE = 1e-9  # token counts closer than this to a whole number are that number


def whole_seconds(seconds: float) -> int:
    """A wait as the whole seconds a header carries: rounded up, after dropping float noise
    below a millisecond (so a 7 s wait computed as 7.000000001 is 7, not 8)."""
    return math.ceil(round(seconds, 3))


@dataclass(frozen=True)
class Quota:
    """One window's standing after a request: `remaining` of `limit` requests left, and
    `reset_s` seconds until the window gives one back (0 when it is full). At a rejection
    `remaining` is 0 and `reset_s` is the Retry-After wait."""

    limit: int
    remaining: int
    reset_s: float

    def headers(self) -> dict[str, str]:
        """`X-RateLimit-*`; Reset is whole seconds from now (rounded up), like Retry-After."""
        return {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(whole_seconds(self.reset_s)),
        }


def tightest(quotas: list[Quota]) -> Quota:
    """The window a client must plan around: fewest requests left, then the longest wait."""
    return min(quotas, key=lambda q: (q.remaining, -q.reset_s))


class QuotaNote:
    """The tightest `Quota` the limiters reported while serving one request."""

    def __init__(self) -> None:
        self.quota: Quota | None = None

    def add(self, quota: Quota) -> None:
        self.quota = quota if self.quota is None else tightest([self.quota, quota])


_note: ContextVar[QuotaNote | None] = ContextVar("bucketsync_quota_note", default=None)


@contextmanager
def noting_quotas() -> Iterator[QuotaNote]:
    """Collect what the limiters report in this context (a request); the note object is
    shared with the worker thread a sync route runs in, which gets a copy of the context."""
    note = QuotaNote()
    token = _note.set(note)
    try:
        yield note
    finally:
        _note.reset(token)


def report(quotas: list[Quota]) -> None:
    """Tell the current request (if one is noting) where its limiter windows stand."""
    note = _note.get()
    if note is not None:
        note.add(tightest(quotas))


class RateLimiter(Protocol):
    """What the services need of a limiter: in-process (`CompoundLimiter`) or Redis. A call
    reports its windows' standing (`report`), whether it admits the request or raises."""

    def acquire(self, key: str) -> None: ...


class CompoundLimiter:
    """Several token buckets per key; a request needs a token from each. A rejection by one
    bucket refunds what the others already gave (BS-5.9)."""

    def __init__(self, name: str, rates: list[Rate], clock: Clock, *, max_keys: int = 100_000):
        self.name = name
        self._rates = rates
        self._clock = clock
        self._lock = threading.Lock()
        self._state: dict[str, list[tuple[float, float]]] = {}  # key -> [(tokens, at)]
        self._max_keys = max_keys

    def _refilled(self, key: str, now: float) -> list[tuple[float, float]]:
        state = self._state.get(key)
        if state is None:
            return [(float(rate.capacity), now) for rate in self._rates]
        return [
            (min(float(rate.capacity), tokens + (now - at) * rate.per_second), now)
            for rate, (tokens, at) in zip(self._rates, state, strict=True)
        ]

    def _quotas(self, state: list[tuple[float, float]]) -> list[Quota]:
        quotas = []
        for rate, (tokens, _at) in zip(self._rates, state, strict=True):
            whole = math.floor(tokens + NOISE)
            wait = 0.0 if whole >= rate.capacity else (whole + 1 - tokens) / rate.per_second
            quotas.append(Quota(rate.capacity, whole, wait))
        return quotas

    def acquire(self, key: str) -> None:
        """Take one token from every bucket or raise `RateLimited` with Retry-After."""
        report(self._quotas(self._take(key)))

    def _take(self, key: str) -> list[tuple[float, float]]:
        with self._lock:
            now = self._clock.monotonic()
            state = self._refilled(key, now)
            taken: list[int] = []
            for index, (tokens, _at) in enumerate(state):
                # Float noise must not refuse a request that waited the Reset it was told.
                if tokens >= 1.0 - NOISE:
                    state[index] = (max(0.0, tokens - 1.0), now)
                    taken.append(index)
                    continue
                for refund in taken:
                    state[refund] = (state[refund][0] + 1.0, now)
                wait = (1.0 - tokens) / self._rates[index].per_second
                self._state[key] = state
                report([Quota(self._rates[index].capacity, 0, wait)])
                raise RateLimited(
                    f"{self.name} rate limit reached for {key}",
                    retry_after_s=wait,
                    hint=f"retry after {max(1, round(wait + 0.5))} s",
                )
            if len(self._state) >= self._max_keys and key not in self._state:
                self._state.pop(next(iter(self._state)))
            self._state[key] = state
            return state

    def tokens(self, key: str) -> list[float]:
        with self._lock:
            return [tokens for tokens, _ in self._refilled(key, self._clock.monotonic())]
