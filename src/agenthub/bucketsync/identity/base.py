"""The `Identity` port: who holds a token, and what role a user has in the org.

Adapters: `local.LocalIdentity` (a token file managed by `agenthub bucketsync users add`)
and `hf.HfIdentity` (HF `whoami` + the org members API).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class Caller:
    """The result of `whoami`: username, email, and role per org (None when unknown)."""

    user: str
    email: str | None = None
    orgs: dict[str, str | None] = field(default_factory=dict)

    def is_member(self, org: str) -> bool:
        return org in self.orgs


class Identity(Protocol):
    def whoami(self, token: str) -> Caller:
        """Resolve a bearer token; raise `Unauthorized` if it is not valid."""
        ...

    def org_role(self, org: str, user: str, email: str | None = None) -> str | None:
        """`user`'s role in `org` looked up with the service's admin token; None if not a
        member. Raises `StorageUnavailable` when the lookup itself fails."""
        ...


class UserAdmin(Identity, Protocol):
    """An Identity that also issues tokens (local mode's token file)."""

    def add_user(self, name: str, *, role: str, email: str | None = None) -> str:
        """Create (or re-key) a user and return the new token."""
        ...

    def revoke_user(self, name: str) -> str | None:
        """Take `name`'s org role away; return the role it had."""
        ...
