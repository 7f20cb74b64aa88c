"""The one place where hub-core domain errors become HTTP responses."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from agenthub.httperrors import StatusTable, install_error_handlers
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


def install(app: FastAPI) -> None:
    install_error_handlers(app, STATUS, render)
