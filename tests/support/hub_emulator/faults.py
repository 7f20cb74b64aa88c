"""Fault injection and request counting for the emulator.

A `Fault` says what happens to a request instead of (or after) its normal answer:

    status(code, retry_after=None)   answer `code` (429 / 5xx) without touching state
    rate_limited(retry_after=300)    429 with `Retry-After`, like the Hub's limiter
    reset(after_apply=False)         close the connection with a TCP RST; `after_apply=True`
                                     runs the handler first (the write landed, the
                                     client never hears so)
    hang(after_apply=False)          never answer (until `release_hangs()` or shutdown)
    slow(seconds)                    answer normally after `seconds`

Refusing connections is not a per-route fault (a connection is refused before its route is
known): see `HubEmulator.refusing()`.

A policy is any `(HubRequest, Route) -> Fault | None`; injected faults are policies, and a
later rate limiter or budget enforcer is one more (`HubEmulator.add_policy`).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from tests.support.hub_emulator.wire import HubRequest, Route

FaultKind = Literal["status", "reset", "hang", "slow"]


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    status_code: int = 503
    retry_after: float | None = None
    delay_s: float = 0.0
    after_apply: bool = False

    @classmethod
    def status(cls, code: int, *, retry_after: float | None = None) -> Fault:
        return cls("status", status_code=code, retry_after=retry_after)

    @classmethod
    def rate_limited(cls, retry_after: float = 300) -> Fault:
        return cls("status", status_code=429, retry_after=retry_after)

    @classmethod
    def reset(cls, *, after_apply: bool = False) -> Fault:
        return cls("reset", after_apply=after_apply)

    @classmethod
    def hang(cls, *, after_apply: bool = False) -> Fault:
        return cls("hang", after_apply=after_apply)

    @classmethod
    def slow(cls, seconds: float) -> Fault:
        return cls("slow", delay_s=seconds)


Policy = Callable[[HubRequest, Route], Fault | None]


class Injection:
    """A fault on some routes (`"*"` = every route), for `times` requests or until removed."""

    def __init__(self, routes: Iterable[str], fault: Fault, times: int | None) -> None:
        self.routes = frozenset(routes)
        self.fault = fault
        self.remaining = times
        self.hits = 0
        self._lock = threading.Lock()

    def __call__(self, request: HubRequest, route: Route) -> Fault | None:
        if "*" not in self.routes and route.name not in self.routes:
            return None
        with self._lock:
            if self.remaining is not None:
                if self.remaining <= 0:
                    return None
                self.remaining -= 1
            self.hits += 1
        return self.fault


@dataclass(frozen=True)
class RequestRecord:
    route: str
    kind: str
    method: str
    path: str
    fault: FaultKind | None
    body: bytes = b""
    token: str | None = None
    # The query string's arguments (`HubRequest.query`): e.g. which `org_members` requests
    # were the `?email=` lookup and which a page of the full member scan.
    query: dict[str, list[str]] = field(default_factory=dict)

    def arg(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None


class RequestLog:
    """Every request the emulator received, by route name, faulted ones included."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[RequestRecord] = []

    def record(self, record: RequestRecord) -> None:
        with self._lock:
            self._records.append(record)

    @property
    def records(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._records)

    def counts(self, *, kind: str | None = None) -> Counter[str]:
        return Counter(r.route for r in self.records if kind is None or r.kind == kind)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()
