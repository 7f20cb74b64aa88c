"""The one place where State Hub domain errors become HTTP responses."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from agenthub.httperrors import StatusTable, install_error_handlers, status_for
from agenthub.statehub.errors import (
    FeedError,
    InvalidRequest,
    MalformedCursor,
    NotFound,
    ResnapshotConflict,
    ResnapshotGone,
    StateHubError,
)

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


def install(app: FastAPI) -> None:
    install_error_handlers(app, STATUS, render)
