"""The one place errors become HTTP responses: `{"error": {"code", "message", "hint"?}}`
for domain errors, request-shape errors, unknown routes and anything unexpected."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from agenthub.bucketsync.core.limiter import whole_seconds
from agenthub.bucketsync.errors import (
    AgentIdTaken,
    AlreadyPromoted,
    BodyOrSourceRequired,
    BucketMissing,
    BucketNotOwnedByCaller,
    BucketSyncError,
    BudgetTooSmall,
    ChannelExists,
    ChannelNotFound,
    Conflict,
    FinalEntriesLimit,
    Forbidden,
    IdentityMismatch,
    InvalidFrontmatter,
    InvalidPath,
    InvalidQuery,
    InvalidRequest,
    JobLaunchFailed,
    JobsDisabled,
    MethodNotAllowed,
    NotFound,
    NotOrganizer,
    NotRegistered,
    OrganizerCheckUnavailable,
    PartialWrite,
    PayloadTooLarge,
    PhaseClosed,
    QuotaBackendUnavailable,
    RateLimited,
    SignInFailed,
    SourceNotFound,
    StorageUnavailable,
    SyncTooLarge,
    TaskforceExists,
    TaskforceNotFound,
    Unauthorized,
    UpstreamUnavailable,
    WriteOutcomeUnknown,
)
from agenthub.httperrors import StatusTable, allowed_methods, install_error_handlers

log = logging.getLogger(__name__)

STATUS: StatusTable[BucketSyncError] = {
    BucketSyncError: 500,
    InvalidPath: 400,
    InvalidQuery: 400,
    InvalidFrontmatter: 400,
    InvalidRequest: 400,
    BodyOrSourceRequired: 400,
    SignInFailed: 400,
    Unauthorized: 401,
    BucketNotOwnedByCaller: 403,
    IdentityMismatch: 403,
    NotOrganizer: 403,
    Forbidden: 403,
    NotRegistered: 404,
    NotFound: 404,
    SourceNotFound: 404,
    JobsDisabled: 404,
    ChannelNotFound: 404,
    TaskforceNotFound: 404,
    MethodNotAllowed: 405,
    AgentIdTaken: 409,
    AlreadyPromoted: 409,
    Conflict: 409,
    PhaseClosed: 409,
    FinalEntriesLimit: 409,
    ChannelExists: 409,
    TaskforceExists: 409,
    BucketMissing: 412,
    PayloadTooLarge: 413,
    SyncTooLarge: 413,
    BudgetTooSmall: 422,
    RateLimited: 429,
    JobLaunchFailed: 502,
    UpstreamUnavailable: 502,
    StorageUnavailable: 503,
    PartialWrite: 503,
    WriteOutcomeUnknown: 503,
    OrganizerCheckUnavailable: 503,
    QuotaBackendUnavailable: 503,
}

_HTTP_CODES = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "PAYLOAD_TOO_LARGE"}


def error_response(
    status: int,
    code: str,
    message: str,
    hint: str | None = None,
    headers: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> JSONResponse:
    error: dict[str, Any] = {"code": code, "message": message}
    if hint:
        error["hint"] = hint
    if extra:
        error.update(extra)
    return JSONResponse({"error": error}, status_code=status, headers=headers)


def _describe(exc: RequestValidationError, content_type: str | None) -> tuple[str, str, str]:
    first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
    loc = [str(part) for part in first.get("loc", ())]
    media = (content_type or "").split(";")[0].strip().lower()
    if loc[:1] == ["body"] and media != "application/json" and not media.endswith("+json"):
        # A body is read as JSON only under a JSON content type (FastAPI's strict rule);
        # without one (or under curl -d's form type) it fails the model without saying why.
        sent = f"its Content-Type is {media!r}" if media else "it has no Content-Type"
        return (
            "INVALID_REQUEST",
            f"the body was not read as JSON: {sent}",
            "send the header 'content-type: application/json' (curl: -H "
            "'content-type: application/json')",
        )
    where = ".".join(loc[1:]) or (loc[0] if loc else "request")
    code = "INVALID_QUERY" if loc and loc[0] in ("query", "path") else "INVALID_REQUEST"
    message = f"{where}: {first.get('msg', 'invalid')}"
    hint = "see GET /v1 for the request shapes"
    if first.get("type") == "extra_forbidden":
        hint = f"remove the field {where!r}; see GET /v1 for the accepted fields"
    return code, message, hint


def retry_after(exc: BucketSyncError) -> dict[str, str]:
    """`Retry-After` for the errors a client should retry, none for the others (and the
    `Allow` of a wrong method)."""
    if isinstance(exc, MethodNotAllowed):
        return {"Allow": exc.allow}
    if isinstance(exc, RateLimited):
        return {"Retry-After": str(max(1, whole_seconds(exc.retry_after_s)))}
    if isinstance(exc, StorageUnavailable):
        wait = exc.retry_after_s if exc.retry_after_s is not None else 5
        return {"Retry-After": str(max(1, whole_seconds(wait)))}
    if isinstance(exc, QuotaBackendUnavailable):
        return {"Retry-After": "30"}
    return {}


def render(exc: BucketSyncError, status: int) -> JSONResponse:
    extra: dict[str, Any] | None = None
    if isinstance(exc, AlreadyPromoted):
        extra = {"filename": exc.filename}
    elif isinstance(exc, BudgetTooSmall):
        extra = {"minimum_tokens": exc.minimum}
    elif isinstance(exc, InvalidFrontmatter) and exc.problems:
        extra = {"problems": exc.problems}
    return error_response(status, exc.code, exc.message, exc.hint, retry_after(exc), extra)


def install(app: FastAPI) -> None:
    install_error_handlers(app, STATUS, render)

    async def validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        code, message, hint = _describe(exc, request.headers.get("content-type"))
        return error_response(400, code, message, hint)

    async def http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = _HTTP_CODES.get(exc.status_code, "HTTP_ERROR")
        hint = "see GET /v1 for the endpoint list" if exc.status_code in (404, 405) else None
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = allowed_methods(request)
        return error_response(exc.status_code, code, str(exc.detail), hint, headers)

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        # Nothing says where the failure struck: a write may have landed before it.
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return error_response(500, "INTERNAL", "internal error; nothing was changed")
        return error_response(
            500,
            "INTERNAL",
            "internal error; the request may have been applied",
            "retry with the same Idempotency-Key",
        )

    app.add_exception_handler(RequestValidationError, validation)
    app.add_exception_handler(StarletteHTTPException, http)
    app.add_exception_handler(Exception, unexpected)


def _is_file_path(path: str) -> bool:
    """`/local/buckets/{ns}/{name}/files/…`: the one route whose body is a file."""
    parts = path.split("/", 6)
    return len(parts) == 7 and parts[1:3] == ["local", "buckets"] and parts[5] == "files"


class BodyLimit:
    """Refuse request bodies whose Content-Length exceeds the limit before reading them:
    `MAX_REQUEST_BYTES` for the API's JSON bodies, `MAX_UPLOAD_BYTES` for a file PUT to
    `/local/buckets/…/files/…` (which the route also counts as it streams it to disk)."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, max_upload_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_upload_bytes = max_upload_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            upload = scope["method"] == "PUT" and _is_file_path(scope["path"])
            limit = self.max_upload_bytes if upload else self.max_bytes
            setting = "MAX_UPLOAD_BYTES" if upload else "MAX_REQUEST_BYTES"
            for name, value in scope.get("headers", []):
                if name == b"content-length":
                    try:
                        size = int(value)
                    except ValueError:
                        size = limit + 1
                    if size > limit:
                        what = "file uploads" if upload else "request bodies"
                        response = error_response(
                            413,
                            "PAYLOAD_TOO_LARGE",
                            f"request body is {size} bytes; {what} are limited to {limit} "
                            f"bytes ({setting})",
                            f"send at most {limit} bytes, or raise {setting} on the server",
                        )
                        await response(scope, receive, send)
                        return
        await self.app(scope, receive, send)
