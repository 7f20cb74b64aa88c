"""Domain errors become HTTP responses in one place per service.

Each service keeps a status table `{ErrorClass: status}` and a `render(exc, status)` that
draws its own wire shape in its `api/errors.py`; `install_error_handlers` registers them
once. An error's status is found by walking its class's MRO until a class has a row, so
the nearest ancestor with a row answers for a subclass that has none.

Around that sits `ErrorBoundary`, the outermost layer of State Hub and hub-core: whatever
escapes the routes is answered in the service's shape (and tried once more when the
service says that is safe), so no client ever meets a plain-text 500 or a keep-alive
connection dropped after one. `json_safe` makes echoed input renderable whatever it held.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agenthub.db import Transience, transience
from agenthub.errors import AgentHubError

E = TypeVar("E", bound=AgentHubError)

StatusTable = Mapping[type[E], int]

log = logging.getLogger(__name__)


def status_for(table: StatusTable[E], exc: E) -> int:
    """The status of the nearest class in `exc`'s MRO that has a row in `table`."""
    for cls in type(exc).__mro__:
        if cls in table:
            return table[cls]
    raise LookupError(f"{type(exc).__name__} has no row in the status table")


def install_error_handlers(
    app: FastAPI,
    table: StatusTable[E],
    render: Callable[[E, int], Response],
) -> None:
    """Answer every error the table covers with `render(exc, status_for(table, exc))`."""
    covered = tuple(table)

    async def handle(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, covered)
        return render(exc, status_for(table, exc))

    for cls in covered:
        app.add_exception_handler(cls, handle)


def json_safe(value: Any) -> Any:
    """`value` with what JSON cannot carry made printable: a lone surrogate escaped as
    `\\udxxx`, a NaN or infinity as its name, bytes decoded with escapes."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, bytes):
        return json_safe(value.decode("utf-8", "backslashreplace"))
    if isinstance(value, dict):
        return {json_safe(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(request: Request) -> str:
    """The `Allow` header for the request's path: every method some route answers there
    (asked of the routes themselves, so included routers and mounts count too)."""
    routes = request.app.router.routes
    allowed = [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes
        )
    ]
    return ", ".join(allowed)


def documented(
    model: type[Any], descriptions: Mapping[int, str], *statuses: int
) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` for these error statuses, each with the body `model`."""
    return {status: {"model": model, "description": descriptions[status]} for status in statuses}


# Methods whose repeat changes nothing more than the first run did.
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "DELETE"})
RETRY_AFTER_S = 1


def retry_safe(scope: Scope, exc: Exception) -> bool:
    """Run a request again after a passing database failure when that cannot apply it
    twice: nothing was applied, or the method is idempotent. A POST whose COMMIT was
    lost is answered 503 instead; its client retries with its `Idempotency-Key`."""
    kind = transience(exc)
    if kind is Transience.NOT_APPLIED:
        return True
    return kind is Transience.OUTCOME_UNKNOWN and scope["method"] in IDEMPOTENT_METHODS


@dataclass(frozen=True)
class Failure:
    """What to tell a client about an exception no handler took."""

    status: int
    code: str
    message: str
    hint: str
    headers: dict[str, str]


def failure(exc: Exception) -> Failure:
    """A passing database failure is a 503 with `Retry-After`; anything else a 500."""
    kind = transience(exc)
    if kind is None:
        return Failure(
            500,
            "internal_error",
            "internal error",
            "the failure is logged on the server; report it if it persists",
            {},
        )
    applied = "was not" if kind is Transience.NOT_APPLIED else "may have been"
    return Failure(
        503,
        "database_unavailable",
        f"the database is unavailable for a moment; the request {applied} applied",
        f"retry after {RETRY_AFTER_S} s; resend a POST with the same Idempotency-Key",
        {"Retry-After": str(RETRY_AFTER_S), "Cache-Control": "no-store"},
    )


Render = Callable[[Exception], Response]
RetryPolicy = Callable[[Scope, Exception], bool]


def _never(_scope: Scope, _exc: Exception) -> bool:
    return False


class ErrorBoundary:
    """Answer every exception that escapes the app with `render(exc)`, once; before
    that, run the request a second time when `retry(scope, exc)` says it is safe.

    Only a failure before the response has started can be answered or retried; the
    request body is kept so the second run reads the same bytes.
    """

    def __init__(self, app: ASGIApp, *, render: Render, retry: RetryPolicy = _never) -> None:
        self.app = app
        self.render = render
        self.retry = retry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = await read_body(receive)
        for attempt in (1, 2):
            started = False

            async def tracked(message: Message) -> None:
                nonlocal started
                if message["type"] == "http.response.start":
                    started = True
                await send(message)

            try:
                await self.app(scope, replay(body, receive), tracked)
                return
            except Exception as exc:
                if started:
                    raise
                if attempt == 1 and self.retry(scope, exc):
                    log.warning("retrying %s %s after %r", scope["method"], scope["path"], exc)
                    continue
                log.error(
                    "answering %s %s with an error", scope["method"], scope["path"], exc_info=exc
                )
                await self.render(exc)(scope, receive, send)
                return


async def read_body(receive: Receive) -> bytes:
    """The whole request body (a client that leaves early ends it)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands out `body` again, then the real channel (a disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
