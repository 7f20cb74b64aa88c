"""Accounts on the emulator: `whoami-v2` by bearer token and org members (paginated,
with the `?email=` lookup the client does not wrap)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from tests.support.hub_emulator.wire import HubError, HubRequest, HubResponse, RouteTable


class AccountState:
    def __init__(self, *, page_size: int = 50) -> None:
        # token -> the whoami-v2 JSON ({"name", "email"?, "orgs": [{"name", "roleInOrg"?}]})
        self.tokens: dict[str, dict[str, Any]] = {}
        # org -> member records ({"user", "role"?, "email"?}); `email` is matched, not shown
        self.members: dict[str, list[dict[str, Any]]] = {}
        self.page_size = page_size

    def add_user(self, token: str, name: str, *, email: str | None = None, **roles: str) -> None:
        """`roles` maps org name to `roleInOrg`; the user becomes a member of each org."""
        orgs = [{"type": "org", "name": org, "roleInOrg": role} for org, role in roles.items()]
        self.tokens[token] = {"type": "user", "name": name, "email": email, "orgs": orgs}
        for org, role in roles.items():
            self.members.setdefault(org, []).append({"user": name, "role": role, "email": email})


def install(table: RouteTable, state: AccountState) -> None:
    @table.add("whoami", "GET", r"/api/whoami-v2")
    def whoami(request: HubRequest) -> HubResponse:
        found = state.tokens.get(request.token or "")
        if found is None:
            raise HubError(401, "Invalid credentials in Authorization header")
        return HubResponse.json(found)

    @table.add("org_members", "GET", r"/api/organizations/(?P<org>[^/]+)/members")
    def members(request: HubRequest) -> HubResponse:
        everyone = state.members.get(request.params["org"], [])
        email = request.arg("email")
        if email is not None:
            everyone = [m for m in everyone if (m.get("email") or "").lower() == email.lower()]
            everyone = everyone[: int(request.arg("limit") or len(everyone) or 1)]
        shown = [
            {"type": "user", "fullname": m["user"], **{k: v for k, v in m.items() if k != "email"}}
            for m in everyone
        ]
        start = int(request.arg("cursor") or 0)
        page = shown[start : start + state.page_size]
        headers = {}
        if start + state.page_size < len(shown):
            query = urlencode({"cursor": start + len(page)})
            headers["Link"] = f'<{request.base_url}{request.path}?{query}>; rel="next"'
        return HubResponse.json(page, headers=headers)

    @table.add("agent_harnesses", "GET", r"/api/agent-harnesses")
    def harnesses(_request: HubRequest) -> HubResponse:
        # The registry's shape (`utils/_detect_agent.py::Registry`): a list here crashed
        # every client whose HOME had no cached copy with AttributeError on `.get`.
        return HubResponse.json({"standardEnvVars": [], "harnesses": {}})
