"""State Hub domain errors.

    StateHubError            stable `code`, human `message`, and a `hint`
    ├── NotFound             an id that names no message (404)
    ├── InvalidRequest       a body or parameter the rules reject (422)
    └── FeedError            change-feed cursor problems (see feed module)
        ├── MalformedCursor  400
        ├── ResnapshotConflict  409, resnapshot_required
        └── ResnapshotGone   410, resnapshot_required

Routers never build HTTP errors themselves; `api.errors.install` maps this tree.
"""

from __future__ import annotations


class StateHubError(Exception):
    code = "statehub_error"
    status = 500

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class NotFound(StateHubError):
    code = "not_found"
    status = 404


class InvalidRequest(StateHubError):
    code = "invalid_request"
    status = 422


class FeedError(StateHubError):
    resnapshot_required = False
    # Where the source stands (contract, instance, epoch, high_water…), when known.
    position: dict[str, object] | None = None


class MalformedCursor(FeedError):
    code = "malformed_cursor"
    status = 400


class ResnapshotConflict(FeedError):
    code = "resnapshot_required"
    status = 409
    resnapshot_required = True


class ResnapshotGone(FeedError):
    code = "resnapshot_required"
    status = 410
    resnapshot_required = True
