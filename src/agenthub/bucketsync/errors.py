"""The bucket-sync domain error tree. Each error carries its stable code and HTTP status;
`api/errors.py` turns them into the uniform `{"error": {code, message, hint}}` body.

    BucketSyncError
    ├── InvalidPath, InvalidQuery, InvalidFrontmatter, InvalidRequest,
    │   BodyOrSourceRequired                                   (400)
    ├── Unauthorized                                           (401)
    ├── BucketNotOwnedByCaller, IdentityMismatch, NotOrganizer,
    │   Forbidden                                              (403)
    ├── NotRegistered, NotFound, SourceNotFound, JobsDisabled,
    │   ChannelNotFound                                        (404)
    ├── AgentIdTaken, AlreadyPromoted, Conflict, ChannelExists (409)
    ├── BucketMissing                                          (412)
    ├── PayloadTooLarge, SyncTooLarge                          (413)
    ├── RateLimited                                            (429, Retry-After)
    ├── JobLaunchFailed                                        (502)
    ├── StorageUnavailable                                     (503, Retry-After)
    │   ├── PartialWrite: a non-transactional batch applied all but `failed` paths
    │   └── OrganizerCheckUnavailable: the org role lookup failed (fail-closed)
    └── QuotaBackendUnavailable                                (503, Retry-After)
"""

from __future__ import annotations

import math


class BucketSyncError(Exception):
    code = "INTERNAL"
    status = 500

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def headers(self) -> dict[str, str]:
        return {}


class InvalidPath(BucketSyncError):
    code, status = "INVALID_PATH", 400


class InvalidQuery(BucketSyncError):
    code, status = "INVALID_QUERY", 400


class InvalidFrontmatter(BucketSyncError):
    code, status = "INVALID_FRONTMATTER", 400


class InvalidRequest(BucketSyncError):
    """The request body or a parameter has the wrong shape (FastAPI's 422, made uniform)."""

    code, status = "INVALID_REQUEST", 400


class BodyOrSourceRequired(BucketSyncError):
    code, status = "BODY_OR_SOURCE_REQUIRED", 400


class Unauthorized(BucketSyncError):
    code, status = "UNAUTHORIZED", 401


class BucketNotOwnedByCaller(BucketSyncError):
    code, status = "BUCKET_NOT_OWNED_BY_CALLER", 403


class IdentityMismatch(BucketSyncError):
    code, status = "IDENTITY_MISMATCH", 403


class NotOrganizer(BucketSyncError):
    code, status = "NOT_ORGANIZER", 403


class Forbidden(BucketSyncError):
    code, status = "FORBIDDEN", 403


class NotRegistered(BucketSyncError):
    code, status = "NOT_REGISTERED", 404


class NotFound(BucketSyncError):
    code, status = "NOT_FOUND", 404


class SourceNotFound(BucketSyncError):
    code, status = "SOURCE_NOT_FOUND", 404


class JobsDisabled(BucketSyncError):
    code, status = "JOBS_DISABLED", 404


class ChannelNotFound(BucketSyncError):
    code, status = "CHANNEL_NOT_FOUND", 404


class AgentIdTaken(BucketSyncError):
    code, status = "AGENT_ID_TAKEN", 409


class AlreadyPromoted(BucketSyncError):
    code, status = "ALREADY_PROMOTED", 409

    def __init__(self, message: str, *, filename: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.filename = filename


class Conflict(BucketSyncError):
    code, status = "CONFLICT", 409


class ChannelExists(BucketSyncError):
    code, status = "CHANNEL_EXISTS", 409


class SyncTooLarge(BucketSyncError):
    code, status = "SYNC_TOO_LARGE", 413


class BucketMissing(BucketSyncError):
    code, status = "BUCKET_MISSING", 412


class PayloadTooLarge(BucketSyncError):
    code, status = "PAYLOAD_TOO_LARGE", 413


class RateLimited(BucketSyncError):
    code, status = "RATE_LIMITED", 429

    def __init__(self, message: str, *, retry_after_s: float, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.retry_after_s = retry_after_s

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(max(1, math.ceil(self.retry_after_s)))}


class StorageUnavailable(BucketSyncError):
    """The bucket backend failed; the request may be retried. Never a 500 or a false 404."""

    code, status = "STORAGE_UNAVAILABLE", 503

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "5"}


class PartialWrite(StorageUnavailable):
    """A batch was applied except for the `failed` paths (HF batches are not transactional)."""

    def __init__(self, message: str, *, failed: list[str], hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.failed = failed


class JobLaunchFailed(BucketSyncError):
    """The job platform refused or failed the launch; nothing was counted against quota."""

    code, status = "JOB_LAUNCH_FAILED", 502


class QuotaBackendUnavailable(BucketSyncError):
    """The job-quota ledger (or its lock) could not be read: fail closed, launch nothing."""

    code, status = "QUOTA_BACKEND_UNAVAILABLE", 503

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "30"}


class OrganizerCheckUnavailable(StorageUnavailable):
    """Seed §11: an organizer-only action whose role lookup failed; retryable, never a
    silent downgrade."""

    code = "ORGANIZER_CHECK_UNAVAILABLE"
