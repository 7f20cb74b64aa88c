"""The one error base every agenthub error tree derives from.

    AgentHubError               stable class-level `code`, human `message`, optional `hint`
    ├── StateHubError           State Hub's tree (statehub/errors.py)
    ├── HubCoreError            hub-core's tree (hubcore/errors.py)
    ├── BucketSyncError         bucket-sync's tree (bucketsync/errors.py)
    ├── SettingsError           bucket-sync configuration (bucketsync/settings.py)
    └── CliError                a command-line mistake with its exit code (clierrors.py)

An error says what went wrong; how it is shown is decided where it is caught: each
service's `api/errors.py` holds the HTTP status table, and the CLI prints `error:`/`hint:`.
"""

from __future__ import annotations


class AgentHubError(Exception):
    code = "agenthub_error"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
