"""The one place where State Hub errors become HTTP responses.

Every answer that is not a success is JSON `{"detail", "code", "hint"?}` (a request-shape
422 keeps FastAPI's list of problems in `detail`): domain errors by the status table,
request-shape errors, unknown routes and methods, and whatever escapes (`unexpected`): a
passing database failure is a 503 with `Retry-After`, anything else a 500.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.types import Scope

from agenthub.db import Transience, transience
from agenthub.httperrors import (
    StatusTable,
    allowed_methods,
    install_error_handlers,
    json_safe,
    status_for,
)
from agenthub.statehub.errors import (
    FeedError,
    InvalidRequest,
    MalformedCursor,
    NotFound,
    ResnapshotConflict,
    ResnapshotGone,
    StateHubError,
)
from agenthub.statehub.schemas import Problem

STATUS: StatusTable[StateHubError] = {
    StateHubError: 500,
    NotFound: 404,
    InvalidRequest: 422,
    FeedError: 500,
    MalformedCursor: 400,
    ResnapshotConflict: 409,
    ResnapshotGone: 410,
}


def status_of(exc: StateHubError) -> int:
    return status_for(STATUS, exc)


def error_body(exc: StateHubError) -> dict[str, Any]:
    body: dict[str, Any] = {"detail": exc.message, "code": exc.code}
    if exc.hint:
        body["hint"] = exc.hint
    if isinstance(exc, FeedError):
        body["resnapshot_required"] = exc.resnapshot_required
        if exc.position:
            body = {**exc.position, **body}
    return body


def render(exc: StateHubError, status: int) -> JSONResponse:
    headers = {"Cache-Control": "no-store"} if isinstance(exc, FeedError) else None
    return JSONResponse(error_body(exc), status_code=status, headers=headers)


_DESCRIPTIONS = {
    400: "Malformed cursor",
    404: "No message with this id",
    409: "Resnapshot required, or an Idempotency-Key reused for another request",
    410: "Cursor past the retention horizon: resnapshot required",
    422: "The request's shape or values are invalid",
    500: "Internal error",
    503: "Database briefly unavailable: retry after Retry-After seconds",
}


def documented(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` for these error statuses, each with the error body."""
    return {status: {"model": Problem, "description": _DESCRIPTIONS[status]} for status in statuses}


# Any route can meet these.
COMMON = documented(422, 500, 503)

# Methods whose repeat changes nothing more than the first run did.
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "DELETE"})
RETRY_AFTER_S = 1
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


def retry_safe(scope: Scope, exc: Exception) -> bool:
    """Run a request again after a passing database failure when that cannot apply it
    twice: nothing was applied, or the method is idempotent. A POST whose COMMIT was
    lost is answered 503 instead; its client retries with its `Idempotency-Key`."""
    kind = transience(exc)
    if kind is Transience.NOT_APPLIED:
        return True
    return kind is Transience.OUTCOME_UNKNOWN and scope["method"] in IDEMPOTENT_METHODS


def unexpected(exc: Exception) -> Response:
    """The answer to an exception no handler took."""
    kind = transience(exc)
    if kind is None:
        return JSONResponse(
            {
                "detail": "internal error",
                "code": "internal_error",
                "hint": "the failure is logged on the server; report it if it persists",
            },
            status_code=500,
        )
    applied = "was not" if kind is Transience.NOT_APPLIED else "may have been"
    return JSONResponse(
        {
            "detail": f"the database is unavailable for a moment; the request {applied} applied",
            "code": "database_unavailable",
            "hint": f"retry after {RETRY_AFTER_S} s; resend a POST with the same Idempotency-Key",
        },
        status_code=503,
        headers={"Retry-After": str(RETRY_AFTER_S), "Cache-Control": "no-store"},
    )


async def _validation(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    # The problems echo the input, which may hold what JSON cannot carry (a lone
    # surrogate, NaN, 1e999 read as infinity).
    problems = json_safe(jsonable_encoder(exc.errors()))
    return JSONResponse({"detail": problems, "code": "invalid_request"}, status_code=422)


async def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = allowed_methods(request)
    body = {"detail": exc.detail, "code": _HTTP_CODES.get(exc.status_code, "http_error")}
    return JSONResponse(body, status_code=exc.status_code, headers=headers)


def install(app: FastAPI) -> None:
    install_error_handlers(app, STATUS, render)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(HTTPException, _http)
