"""In-process token-bucket rate limiters (restart-safe by loss), with time injected."""

from __future__ import annotations

import threading
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


class RateLimiter(Protocol):
    """What the services need of a limiter: in-process (`CompoundLimiter`) or Redis."""

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

    def acquire(self, key: str) -> None:
        """Take one token from every bucket or raise `RateLimited` with Retry-After."""
        with self._lock:
            now = self._clock.monotonic()
            state = self._refilled(key, now)
            taken: list[int] = []
            for index, (tokens, _at) in enumerate(state):
                if tokens >= 1.0:
                    state[index] = (tokens - 1.0, now)
                    taken.append(index)
                    continue
                for refund in taken:
                    state[refund] = (state[refund][0] + 1.0, now)
                wait = (1.0 - tokens) / self._rates[index].per_second
                self._state[key] = state
                raise RateLimited(
                    f"{self.name} rate limit reached for {key}",
                    retry_after_s=wait,
                    hint=f"retry after {max(1, round(wait + 0.5))} s",
                )
            if len(self._state) >= self._max_keys and key not in self._state:
                self._state.pop(next(iter(self._state)))
            self._state[key] = state

    def tokens(self, key: str) -> list[float]:
        with self._lock:
            return [tokens for tokens, _ in self._refilled(key, self._clock.monotonic())]
