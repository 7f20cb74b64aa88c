"""hub-core domain errors.

    HubCoreError                 stable `code`, human `message`, and a `hint`
    ├── SnapshotRejected         a bundle the import rules refuse (names the rows)
    ├── CaptureFailed            the source could not be read consistently
    ├── ConfigurationError       settings that must not start a server
    ├── FeedRefused              a feed page or re-snapshot the §5/§6 rules refuse
    │                            (nothing was changed; `resnapshot` says whether a fresh
    │                            snapshot is the way out)
    ├── SourceError              talking to State Hub's feed
    │   ├── SourceUnavailable    transport failure or an unexpected answer
    │   └── ResnapshotRequired   State Hub answered 409/410 `resnapshot_required`
    └── ReadError                the read endpoint's refusals
        ├── ReadsDisabled        flag off: the endpoint does not exist
        ├── Unauthenticated      missing or wrong operator bearer
        ├── AgentNotServed       `to_agent` is not the configured pilot agent
        └── MethodNotAllowed     anything but GET

Domain code never builds HTTP errors; `api.errors.STATUS` gives each class its status
and `api.errors.install` registers the mapping once.
"""

from __future__ import annotations

from collections.abc import Sequence

from agenthub.errors import AgentHubError

MAX_NAMED_ROWS = 20


class HubCoreError(AgentHubError):
    code = "hubcore_error"


class SnapshotRejected(HubCoreError):
    """One import rule failed. `rows` lists the offending ids (or row positions)."""

    def __init__(
        self, code: str, message: str, *, rows: Sequence[str] = (), hint: str | None = None
    ) -> None:
        self.code = code
        self.rows = list(rows)
        shown = ", ".join(self.rows[:MAX_NAMED_ROWS])
        more = len(self.rows) - MAX_NAMED_ROWS
        if shown:
            message = f"{message}: {shown}" + (f" (and {more} more)" if more > 0 else "")
        super().__init__(message, hint=hint)


class CaptureFailed(HubCoreError):
    code = "capture_failed"


class ConfigurationError(HubCoreError):
    code = "configuration_error"


class FeedRefused(HubCoreError):
    """A page (or snapshot) the follower will not apply. `rows` names the offending keys."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        rows: Sequence[str] = (),
        hint: str | None = None,
        resnapshot: bool = True,
    ) -> None:
        self.code = code
        self.rows = list(rows)
        self.resnapshot = resnapshot
        shown = ", ".join(self.rows[:MAX_NAMED_ROWS])
        more = len(self.rows) - MAX_NAMED_ROWS
        if shown:
            message = f"{message}: {shown}" + (f" (and {more} more)" if more > 0 else "")
        super().__init__(message, hint=hint)


class SourceError(HubCoreError):
    code = "source_error"


class SourceUnavailable(SourceError):
    code = "source_unavailable"


class ResnapshotRequired(SourceError):
    """State Hub refused the cursor: 409 (another instance/epoch/version) or 410 (past the horizon)."""

    code = "resnapshot_required"

    def __init__(self, message: str, *, gone: bool, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.gone = gone


class ReadError(HubCoreError):
    pass


class ReadsDisabled(ReadError):
    code = "not_found"


class Unauthenticated(ReadError):
    code = "unauthenticated"


class AgentNotServed(ReadError):
    code = "agent_not_served"


class MethodNotAllowed(ReadError):
    code = "method_not_allowed"
