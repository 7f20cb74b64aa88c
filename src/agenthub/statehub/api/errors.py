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

from agenthub import httperrors
from agenthub.httperrors import (
    StatusTable,
    allowed_methods,
    failure,
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
    return httperrors.documented(Problem, _DESCRIPTIONS, *statuses)


# Any route can meet these.
COMMON = documented(422, 500, 503)

_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


def unexpected(exc: Exception) -> Response:
    """The answer to an exception no handler took."""
    failed = failure(exc)
    body = {"detail": failed.message, "code": failed.code, "hint": failed.hint}
    return JSONResponse(body, status_code=failed.status, headers=failed.headers)


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
