"""hub-core domain errors.

    HubCoreError                 stable `code`, human `message`, and a `hint`
    ├── SnapshotRejected         a bundle the import rules refuse (names the rows); 422
    ├── CaptureFailed            the source could not be read consistently; 502
    ├── ConfigurationError       settings that must not start a server; 500
    └── ReadError                the read endpoint's refusals
        ├── ReadsDisabled        flag off: the endpoint does not exist; 404
        ├── Unauthenticated      missing or wrong operator bearer; 401
        ├── AgentNotServed       `to_agent` is not the configured pilot agent; 403
        └── MethodNotAllowed     anything but GET; 405

Domain code never builds HTTP errors; `api.errors.install` maps this tree once.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_NAMED_ROWS = 20


class HubCoreError(Exception):
    code = "hubcore_error"
    status = 500

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class SnapshotRejected(HubCoreError):
    """One import rule failed. `rows` lists the offending ids (or row positions)."""

    status = 422

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
    status = 502


class ConfigurationError(HubCoreError):
    code = "configuration_error"
    status = 500


class ReadError(HubCoreError):
    pass


class ReadsDisabled(ReadError):
    code = "not_found"
    status = 404


class Unauthenticated(ReadError):
    code = "unauthenticated"
    status = 401


class AgentNotServed(ReadError):
    code = "agent_not_served"
    status = 403


class MethodNotAllowed(ReadError):
    code = "method_not_allowed"
    status = 405
