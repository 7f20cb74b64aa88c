"""State Hub domain errors.

    StateHubError            stable `code`, human `message`, and a `hint`
    ├── NotFound             an id that names no message
    ├── InvalidRequest       a body or parameter the rules reject
    └── FeedError            change-feed cursor problems (see feed module)
        ├── MalformedCursor
        ├── ResnapshotConflict  resnapshot_required (another instance, epoch or version)
        └── ResnapshotGone   resnapshot_required (past the horizon)

Routers never build HTTP errors themselves; `api.errors.STATUS` gives each class its
status and `api.errors.install` registers the mapping once.
"""

from __future__ import annotations

from agenthub.errors import AgentHubError


class StateHubError(AgentHubError):
    code = "statehub_error"


class NotFound(StateHubError):
    code = "not_found"


class InvalidRequest(StateHubError):
    code = "invalid_request"


class FeedError(StateHubError):
    resnapshot_required = False
    # Where the source stands (contract, instance, epoch, high_water…), when known.
    position: dict[str, object] | None = None


class MalformedCursor(FeedError):
    code = "malformed_cursor"


class ResnapshotConflict(FeedError):
    code = "resnapshot_required"
    resnapshot_required = True


class ResnapshotGone(FeedError):
    code = "resnapshot_required"
    resnapshot_required = True
