"""The emulator's request and response values and its route table.

A route is a method, a path regex with named groups, a handler and a `kind`: `api` (the
Hub's rate-limited `/api/...` routes), `resolve` (file reads, limited separately on the
Hub) or `cas` (the Xet storage server, a different host). Handlers take a `HubRequest` and
return a `HubResponse`; raising `HubError` answers with the Hub's error headers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qs

RouteKind = Literal["api", "resolve", "cas"]


@dataclass
class HubRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-cased names
    body: bytes
    params: dict[str, str] = field(default_factory=dict)  # the route's named groups
    base_url: str = ""  # the listener's own URL, for links and redirects

    @classmethod
    def parse(
        cls, method: str, target: str, headers: dict[str, str], body: bytes, base_url: str
    ) -> HubRequest:
        path, _, query = target.partition("?")
        return cls(method, path, parse_qs(query), headers, body, base_url=base_url)

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default

    def json(self) -> Any:
        return json.loads(self.body or b"null")

    @property
    def token(self) -> str | None:
        auth = self.headers.get("authorization", "")
        return auth[7:] if auth.lower().startswith("bearer ") else None


@dataclass
class HubResponse:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    # A streamed body (server-sent events): chunks are written as produced, then the
    # connection is closed. The iterator should end when `stopping()` turns true.
    stream: Iterator[bytes] | None = None

    @classmethod
    def json(
        cls, data: Any, status: int = 200, headers: dict[str, str] | None = None
    ) -> HubResponse:
        return cls(
            status,
            json.dumps(data).encode(),
            {"Content-Type": "application/json", **(headers or {})},
        )


class HubError(Exception):
    """Answer with `status`, the Hub's `X-Error-Code`/`X-Error-Message` headers and a JSON
    `{"error": message}` body (what `hf_raise_for_status` reads)."""

    def __init__(self, status: int, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code

    def response(self) -> HubResponse:
        headers = {"X-Error-Message": str(self)}
        if self.code:
            headers["X-Error-Code"] = self.code
        return HubResponse.json({"error": str(self)}, self.status, headers)


Handler = Callable[[HubRequest], HubResponse]


@dataclass(frozen=True)
class Route:
    name: str
    method: str
    pattern: re.Pattern[str]
    handler: Handler
    kind: RouteKind = "api"


class RouteTable:
    """Routes in match order. `add` is a decorator, so a feature module extends the table
    with `@table.add("space_info", "GET", r"/api/spaces/(?P<repo>[^/]+/[^/]+)")`."""

    def __init__(self) -> None:
        self.routes: list[Route] = []

    def add(
        self, name: str, method: str, pattern: str, *, kind: RouteKind = "api"
    ) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.routes.append(Route(name, method, re.compile(pattern + r"\Z"), handler, kind))
            return handler

        return register

    def match(self, method: str, path: str, kinds: set[RouteKind]) -> tuple[Route, dict[str, str]]:
        """The first route for `method` and `path`; a `HEAD` falls back to the `GET` route."""
        for wanted in (method, "GET") if method == "HEAD" else (method,):
            for route in self.routes:
                if route.method == wanted and route.kind in kinds:
                    found = route.pattern.match(path)
                    if found:
                        return route, found.groupdict()
        raise LookupError(path)
