"""The one place where State Hub domain errors become HTTP responses."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from agenthub.statehub.errors import FeedError, StateHubError


def error_body(exc: StateHubError) -> dict[str, Any]:
    body: dict[str, Any] = {"detail": exc.message, "code": exc.code}
    if exc.hint:
        body["hint"] = exc.hint
    if isinstance(exc, FeedError):
        body["resnapshot_required"] = exc.resnapshot_required
        if exc.position:
            body = {**exc.position, **body}
    return body


def install(app: FastAPI) -> None:
    async def handle(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StateHubError)
        headers = {"Cache-Control": "no-store"} if isinstance(exc, FeedError) else None
        return JSONResponse(error_body(exc), status_code=exc.status, headers=headers)

    app.add_exception_handler(StateHubError, handle)
