"""The one place where hub-core domain errors become HTTP responses."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from agenthub.hubcore.errors import (
    HubCoreError,
    MethodNotAllowed,
    SnapshotRejected,
    Unauthenticated,
)


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


def install(app: FastAPI) -> None:
    async def handle(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HubCoreError)
        return JSONResponse(error_body(exc), status_code=exc.status, headers=headers_for(exc))

    app.add_exception_handler(HubCoreError, handle)
