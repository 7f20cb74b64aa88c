"""The one place where hub-core errors become HTTP responses.

Every answer that is not a success is JSON `{"detail", "code", "hint"?}` (a request-shape
422 keeps FastAPI's list of problems in `detail`): domain errors by the status table,
request-shape errors, unknown routes and methods, and whatever escapes (`unexpected`).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException
from starlette.responses import Response

from agenthub import httperrors
from agenthub.httperrors import (
    ErrorBoundary,
    StatusTable,
    allowed_methods,
    failure,
    install_error_handlers,
    json_safe,
    retry_safe,
)
from agenthub.hubcore.errors import (
    AgentNotServed,
    CaptureFailed,
    ConfigurationError,
    FeedRefused,
    HubCoreError,
    MethodNotAllowed,
    ReadError,
    ReadsDisabled,
    ResnapshotRequired,
    SnapshotRejected,
    SourceError,
    SourceUnavailable,
    Unauthenticated,
)

STATUS: StatusTable[HubCoreError] = {
    HubCoreError: 500,
    SnapshotRejected: 422,
    CaptureFailed: 502,
    ConfigurationError: 500,
    FeedRefused: 409,
    SourceError: 502,
    SourceUnavailable: 502,
    ResnapshotRequired: 502,
    ReadError: 500,
    ReadsDisabled: 404,
    Unauthenticated: 401,
    AgentNotServed: 403,
    MethodNotAllowed: 405,
}


def error_body(exc: HubCoreError) -> dict[str, Any]:
    body: dict[str, Any] = {"detail": exc.message, "code": exc.code}
    if exc.hint:
        body["hint"] = exc.hint
    if isinstance(exc, SnapshotRejected):
        body["rows"] = exc.rows
    return body


def headers_for(exc: HubCoreError) -> dict[str, str]:
    headers = {"Cache-Control": "no-store"}
    if isinstance(exc, Unauthenticated):
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, MethodNotAllowed):
        headers["Allow"] = "GET"
    return headers


def render(exc: HubCoreError, status: int) -> JSONResponse:
    return JSONResponse(error_body(exc), status_code=status, headers=headers_for(exc))


class Problem(BaseModel):
    """Every hub-core error body; a refused snapshot adds the offending `rows`."""

    model_config = ConfigDict(extra="allow")

    detail: str | list[dict[str, Any]]
    code: str
    hint: str | None = None


_DESCRIPTIONS = {
    401: "No or wrong operator bearer token",
    403: "The pilot does not serve this agent's inbox",
    404: "Inbox reads are off",
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
NO_STORE = {"Cache-Control": "no-store"}


def unexpected(exc: Exception) -> Response:
    """The answer to an exception no handler took."""
    failed = failure(exc)
    body = {"detail": failed.message, "code": failed.code, "hint": failed.hint}
    return JSONResponse(body, status_code=failed.status, headers={**NO_STORE, **failed.headers})


async def _validation(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    # The problems echo the input, which may hold what JSON cannot carry.
    problems = json_safe(jsonable_encoder(exc.errors()))
    body = {"detail": problems, "code": "invalid_request"}
    return JSONResponse(body, status_code=422, headers=NO_STORE)


async def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    headers = {**NO_STORE, **(exc.headers or {})}
    if exc.status_code == 405:
        headers["Allow"] = allowed_methods(request)
    body = {"detail": exc.detail, "code": _HTTP_CODES.get(exc.status_code, "http_error")}
    return JSONResponse(body, status_code=exc.status_code, headers=headers)


def install(app: FastAPI) -> None:
    install_error_handlers(app, STATUS, render)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(HTTPException, _http)
    app.add_middleware(ErrorBoundary, render=unexpected, retry=retry_safe)
