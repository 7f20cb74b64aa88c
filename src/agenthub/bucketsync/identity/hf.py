"""`HfIdentity`: the Identity port on HF `whoami` and the org members API.

Role lookup uses the Space's admin token: a targeted `members?email=…&limit=1` first
(when the caller's email is known), then a cached full member map (`roles_ttl_s`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import httpx
import huggingface_hub
from huggingface_hub import constants, get_session
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils._headers import build_hf_headers

from agenthub.bucketsync.errors import StorageUnavailable, Unauthorized
from agenthub.bucketsync.identity.base import Caller
from agenthub.clock import Clock, SystemClock

EmailLookup = Callable[[str, str, str | None], list[dict[str, Any]]]


def members_by_email(org: str, email: str, token: str | None) -> list[dict[str, Any]]:
    """`GET /api/organizations/{org}/members?email=…&limit=1` (not wrapped by the client)."""
    response = get_session().get(
        f"{constants.ENDPOINT}/api/organizations/{org}/members",
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
        api: Any = None,
        email_lookup: EmailLookup | None = None,
        clock: Clock | None = None,
        roles_ttl_s: float = 300.0,
    ) -> None:
        self._api = api if api is not None else huggingface_hub
        self._http_error = HfHubHTTPError
        self._token = admin_token
        self._email_lookup = email_lookup or members_by_email
        self._clock = clock or SystemClock()
        self._ttl = roles_ttl_s
        self._lock = threading.Lock()
        self._roles: dict[str, tuple[float, dict[str, str]]] = {}

    def whoami(self, token: str) -> Caller:
        if not token:
            raise Unauthorized("no token given", hint="send Authorization: Bearer <hf token>")
        try:
            data = self._api.whoami(token=token)
        except ValueError as exc:
            raise Unauthorized(f"the token was refused: {exc}") from exc
        except self._http_error as exc:
            status = getattr(getattr(exc, "response", None), "status_code", None)
            if status in (401, 403):
                raise Unauthorized(
                    "the hub rejected the token", hint="use a valid HF token (hf auth login)"
                ) from exc
            raise StorageUnavailable(f"whoami failed ({status})", hint="retry shortly") from exc
        except (httpx.HTTPError, OSError) as exc:
            raise StorageUnavailable(f"whoami failed: {exc}", hint="retry shortly") from exc
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
            try:
                hits = self._email_lookup(org, email, self._token)
            except Exception:
                hits = None  # the targeted lookup is best effort; fall back to the scan
            if hits:
                member = hits[0]
                if str(member.get("user", "")).lower() == user.lower():
                    return str(member.get("role") or "member")
        return self._role_map(org).get(user.lower())

    def _role_map(self, org: str) -> dict[str, str]:
        now = self._clock.monotonic()
        with self._lock:
            cached = self._roles.get(org)
            if cached is not None and now - cached[0] < self._ttl:
                return cached[1]
            try:
                members = list(self._api.list_organization_members(org, token=self._token))
            except (self._http_error, httpx.HTTPError, OSError, ValueError) as exc:
                raise StorageUnavailable(
                    f"could not list members of {org}", hint="retry shortly"
                ) from exc
            roles = {
                str(m.username).lower(): str(getattr(m, "role", None) or "member") for m in members
            }
            self._roles[org] = (now, roles)
            return roles
