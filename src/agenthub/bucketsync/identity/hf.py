"""`HfIdentity`: the Identity port on HF `whoami` and the org members API.

Role lookup uses the Space's admin token: a targeted `members?email=…&limit=1` first
(when the caller's email is known), then a full member map; both answers are cached for
`roles_ttl_s` (a failed lookup is not), so a caller asking again (`/v1/me`, a human's
post) costs the Hub nothing until a role change is due to be seen. Every
call runs through `HubCalls`: a deadline, no sleeping, failures become `StorageUnavailable`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from cachetools import TTLCache
from huggingface_hub import HfApi, get_session
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils._headers import build_hf_headers

from agenthub.bucketsync.errors import Unauthorized
from agenthub.bucketsync.identity.base import Caller
from agenthub.bucketsync.storage.governor import HubGovernor
from agenthub.bucketsync.storage.hubcalls import DEFAULT_DEADLINE_S, HubCalls
from agenthub.clock import Clock, SystemClock

EmailLookup = Callable[[str, str, str | None], list[dict[str, Any]]]
EMAIL_CACHE_SIZE = 10_000


def members_by_email(
    org: str, email: str, token: str | None, *, endpoint: str
) -> list[dict[str, Any]]:
    """`GET /api/organizations/{org}/members?email=…&limit=1` (not wrapped by the client)."""
    response = get_session().get(
        f"{endpoint}/api/organizations/{org}/members",
        params={"email": email, "limit": 1},
        headers=build_hf_headers(token=token),
    )
    response.raise_for_status()
    data = response.json()
    return data if isinstance(data, list) else []


class HfIdentity:
    def __init__(
        self,
        *,
        admin_token: str | None,
        endpoint: str | None = None,
        deadline_s: float = DEFAULT_DEADLINE_S,
        api: Any = None,
        email_lookup: EmailLookup | None = None,
        clock: Clock | None = None,
        roles_ttl_s: float = 300.0,
        governor: HubGovernor | None = None,
    ) -> None:
        self._api = api if api is not None else HfApi(endpoint=endpoint, token=admin_token)
        self._calls = HubCalls(deadline_s=deadline_s, governor=governor)
        self._token = admin_token
        self._email_lookup = email_lookup or self._members_by_email
        self._clock = clock or SystemClock()
        self._ttl = roles_ttl_s
        self._lock = threading.Lock()
        self._roles: dict[str, tuple[float, dict[str, str]]] = {}
        # (org, email) -> the lookup's hits; bounded: one entry per human who signed in.
        self._by_email: TTLCache[tuple[str, str], list[dict[str, Any]]] = TTLCache(
            maxsize=EMAIL_CACHE_SIZE, ttl=roles_ttl_s, timer=self._clock.monotonic
        )
        self._email_lock = threading.Lock()

    def _members_by_email(self, org: str, email: str, token: str | None) -> list[dict[str, Any]]:
        return members_by_email(org, email, token, endpoint=str(self._api.endpoint))

    def whoami(self, token: str) -> Caller:
        if not token:
            raise Unauthorized("no token given", hint="send Authorization: Bearer <hf token>")

        def ask() -> Any:
            try:
                return self._api.whoami(token=token)
            except HfHubHTTPError as exc:
                if getattr(exc.response, "status_code", None) in (401, 403):
                    raise Unauthorized(
                        "the hub rejected the token", hint="use a valid HF token (hf auth login)"
                    ) from exc
                raise

        data = self._calls.run("whoami", ask)
        name = data.get("name") if isinstance(data, dict) else None
        if not name:
            raise Unauthorized("the token does not belong to a user")
        orgs = {
            str(org["name"]): org.get("roleInOrg")
            for org in data.get("orgs", [])
            if isinstance(org, dict) and org.get("name")
        }
        return Caller(user=str(name), email=data.get("email"), orgs=orgs)

    def org_role(self, org: str, user: str, email: str | None = None) -> str | None:
        if email:
            hits = self._members_with_email(org, email)
            if hits:
                member = hits[0]
                if str(member.get("user", "")).lower() == user.lower():
                    return str(member.get("role") or "member")
        return self._role_map(org).get(user.lower())

    def _members_with_email(self, org: str, email: str) -> list[dict[str, Any]] | None:
        """The targeted lookup's hits, cached; None when it failed (best effort: the
        caller falls back to the member map)."""
        key = (org, email.lower())
        with self._email_lock:
            cached = self._by_email.get(key)
        if cached is not None:
            return cached
        try:
            hits: list[dict[str, Any]] = self._calls.run(
                f"members of {org} by email", lambda: self._email_lookup(org, email, self._token)
            )
        except Exception:
            return None
        with self._email_lock:
            self._by_email[key] = hits
        return hits

    def _role_map(self, org: str) -> dict[str, str]:
        now = self._clock.monotonic()
        with self._lock:
            cached = self._roles.get(org)
            if cached is not None and now - cached[0] < self._ttl:
                return cached[1]
            members = self._calls.run(
                f"could not list members of {org}",
                lambda: list(self._api.list_organization_members(org, token=self._token)),
            )
            roles = {
                str(m.username).lower(): str(getattr(m, "role", None) or "member") for m in members
            }
            self._roles[org] = (now, roles)
            return roles
