"""What bucket-sync's OpenAPI says about failures: the error body and the statuses a
route can answer with it (the statuses are those of `errors.STATUS`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from agenthub.httperrors import documented


class ErrorDetail(BaseModel):
    code: str
    message: str
    hint: str | None = None
    filename: str | None = None
    minimum_tokens: int | None = None


class ErrorBody(BaseModel):
    """Every bucket-sync error: `{"error": {"code", "message", "hint"?}}`."""

    error: ErrorDetail


_DESCRIPTIONS = {
    400: "Invalid path, query, frontmatter or request",
    401: "No or invalid bearer token",
    403: "Not allowed for this caller",
    404: "Not found, or not registered",
    409: "Conflict: taken, already promoted or already exists",
    412: "The caller's scratch bucket is missing",
    413: "Body or sync too large",
    429: "Rate limited: retry after Retry-After seconds",
    502: "An upstream (job runner, Hub) failed",
    503: "Storage, bus or a backend briefly unavailable: retry after Retry-After seconds",
}

# Only `GET /v1/digest?budget_tokens=` answers it.
BUDGET_ERROR = documented(
    ErrorBody, {422: "budget_tokens is below the floor named in minimum_tokens"}, 422
)

# Every route declares these: authentication, validation and storage failures can reach any.
ERRORS = documented(ErrorBody, _DESCRIPTIONS, *_DESCRIPTIONS)


def served_as(media_type: str) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route that answers 200 with a file of `media_type`."""
    return {200: {"content": {media_type: {"schema": {"type": "string"}}}}}
