"""The bucket-sync domain error tree: each error carries its stable code. `api/errors.py`
gives each class its HTTP status (and the retryable ones their `Retry-After`) and turns
them into the uniform `{"error": {code, message, hint}}` body.

    BucketSyncError
    ├── InvalidPath, InvalidQuery, InvalidFrontmatter, InvalidRequest,
    │   BodyOrSourceRequired                      the request is malformed
    ├── Unauthorized                              no or a wrong bearer
    ├── BucketNotOwnedByCaller, IdentityMismatch,
    │   NotOrganizer, Forbidden                   the caller may not do this
    ├── NotRegistered, NotFound, SourceNotFound,
    │   JobsDisabled, ChannelNotFound,
    │   TaskforceNotFound                         nothing (enabled) by that name
    ├── AgentIdTaken, AlreadyPromoted, Conflict,
    │   ChannelExists, TaskforceExists            clashes with what exists
    ├── PhaseClosed, FinalEntriesLimit            the challenge's phases refuse it now
    ├── BucketMissing                             a precondition bucket is absent
    ├── PayloadTooLarge, SyncTooLarge             over a size limit
    ├── BudgetTooSmall                            a token budget below the `minimum`
    ├── RateLimited                               retry after `retry_after_s`
    ├── JobLaunchFailed                           the job platform refused the launch
    ├── StorageUnavailable                        the bucket backend failed; retryable
    │   ├── PartialWrite: a non-transactional batch applied all but `failed` paths
    │   ├── WriteOutcomeUnknown: the write was sent but no answer came back
    │   └── OrganizerCheckUnavailable: the org role lookup failed (fail-closed)
    ├── QuotaBackendUnavailable                   the job-quota ledger failed; retryable
    ├── SignInFailed                              the dashboard's OAuth round trip failed
    └── UpstreamUnavailable                       the dashboard's bucket-sync is unreachable
"""

from __future__ import annotations

from agenthub.errors import AgentHubError


class BucketSyncError(AgentHubError):
    code = "INTERNAL"


class InvalidPath(BucketSyncError):
    code = "INVALID_PATH"


class InvalidQuery(BucketSyncError):
    code = "INVALID_QUERY"


class InvalidFrontmatter(BucketSyncError):
    """`problems`, when given, lists every problem found (`field`, `message`, `hint`); the
    error's own message and hint are the first one's, so older clients read it unchanged."""

    code = "INVALID_FRONTMATTER"

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        problems: list[dict[str, str]] | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.problems = problems or []


class InvalidRequest(BucketSyncError):
    """The request body or a parameter has the wrong shape (FastAPI's 422, made uniform)."""

    code = "INVALID_REQUEST"


class MethodNotAllowed(BucketSyncError):
    """A route exists at the path for another method (`allow` names it)."""

    code = "METHOD_NOT_ALLOWED"

    def __init__(self, message: str, *, hint: str | None = None, allow: str) -> None:
        super().__init__(message, hint=hint)
        self.allow = allow


class BodyOrSourceRequired(BucketSyncError):
    code = "BODY_OR_SOURCE_REQUIRED"


class Unauthorized(BucketSyncError):
    code = "UNAUTHORIZED"


class BucketNotOwnedByCaller(BucketSyncError):
    code = "BUCKET_NOT_OWNED_BY_CALLER"


class IdentityMismatch(BucketSyncError):
    code = "IDENTITY_MISMATCH"


class NotOrganizer(BucketSyncError):
    code = "NOT_ORGANIZER"


class Forbidden(BucketSyncError):
    code = "FORBIDDEN"


class NotRegistered(BucketSyncError):
    code = "NOT_REGISTERED"


class NotFound(BucketSyncError):
    code = "NOT_FOUND"


class SourceNotFound(BucketSyncError):
    code = "SOURCE_NOT_FOUND"


class JobsDisabled(BucketSyncError):
    code = "JOBS_DISABLED"


class ChannelNotFound(BucketSyncError):
    code = "CHANNEL_NOT_FOUND"


class TaskforceNotFound(BucketSyncError):
    code = "TASKFORCE_NOT_FOUND"


class AgentIdTaken(BucketSyncError):
    code = "AGENT_ID_TAKEN"


class AlreadyPromoted(BucketSyncError):
    code = "ALREADY_PROMOTED"

    def __init__(self, message: str, *, filename: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.filename = filename


class Conflict(BucketSyncError):
    code = "CONFLICT"


class ChannelExists(BucketSyncError):
    code = "CHANNEL_EXISTS"


class TaskforceExists(BucketSyncError):
    code = "TASKFORCE_EXISTS"


class PhaseClosed(BucketSyncError):
    """No open phase accepts this now (a result, a job, a final-entry change); the hint
    names the next phase and when it starts."""

    code = "PHASE_CLOSED"


class FinalEntriesLimit(BucketSyncError):
    """An agent already marked FINAL_ENTRIES_MAX results as final."""

    code = "FINAL_ENTRIES_LIMIT"


class SyncTooLarge(BucketSyncError):
    code = "SYNC_TOO_LARGE"


class BucketMissing(BucketSyncError):
    code = "BUCKET_MISSING"


class PayloadTooLarge(BucketSyncError):
    code = "PAYLOAD_TOO_LARGE"


class BudgetTooSmall(BucketSyncError):
    """A `budget_tokens` too small for even the envelope of what was asked for."""

    code = "BUDGET_TOO_SMALL"

    def __init__(self, message: str, *, minimum: int, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.minimum = minimum


class RateLimited(BucketSyncError):
    code = "RATE_LIMITED"

    def __init__(self, message: str, *, retry_after_s: float, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.retry_after_s = retry_after_s


class StorageUnavailable(BucketSyncError):
    """The bucket backend failed; the request may be retried. Never a 500 or a false 404.
    `retry_after_s` passes on the backend's own `Retry-After` (a Hub 429), when it gave one."""

    code = "STORAGE_UNAVAILABLE"

    def __init__(
        self, message: str, *, hint: str | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.retry_after_s = retry_after_s


class WriteOutcomeUnknown(StorageUnavailable):
    """A write left for the backend and no answer came back (a reset, a timeout, a 5xx): it
    may have been applied, so the client retries with the same Idempotency-Key."""


class PartialWrite(StorageUnavailable):
    """A batch was applied except for the `failed` paths (HF batches are not transactional)."""

    def __init__(self, message: str, *, failed: list[str], hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.failed = failed


class JobLaunchFailed(BucketSyncError):
    """The job platform refused or failed the launch; nothing was counted against quota."""

    code = "JOB_LAUNCH_FAILED"


class QuotaBackendUnavailable(BucketSyncError):
    """The job-quota ledger (or its lock) could not be read: fail closed, launch nothing."""

    code = "QUOTA_BACKEND_UNAVAILABLE"


class OrganizerCheckUnavailable(StorageUnavailable):
    """Seed §11: an organizer-only action whose role lookup failed; retryable, never a
    silent downgrade."""

    code = "ORGANIZER_CHECK_UNAVAILABLE"


class SignInFailed(BucketSyncError):
    """The dashboard's OAuth round trip did not end in a signed-in user."""

    code = "SIGN_IN_FAILED"


class UpstreamUnavailable(BucketSyncError):
    """The bucket-sync API behind the dashboard could not be reached."""

    code = "UPSTREAM_UNAVAILABLE"
