"""HF-mode sign-in written by us (hf-spaces-facts.md §2.6, §4): a configured redirect URI,
one-use expiring state bound to the browser, no open redirect, a declined consent that
reads as a message, and a session that keeps the token server-side.

The authorization server is a local `OAuthProvider` at our own boundary; the token it
hands out is a real local-identity token, so everything after the exchange is the real
path (`/v1/me`, human posts)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient

from agenthub.bucketsync.app import create_app
from agenthub.bucketsync.dashboard.oauth import redirect_uri, safe_next
from agenthub.bucketsync.dashboard.routes import SESSION_COOKIE
from agenthub.bucketsync.errors import SignInFailed
from agenthub.bucketsync.identity.local import LocalIdentity
from agenthub.bucketsync.settings import BucketSyncSettings, SettingsError
from agenthub.bucketsync.storage.local import LocalBucketStore
from agenthub.clock import FrozenClock
from tests.bucketsync.conftest import ORG, make_settings

PUBLIC = "https://board.example.org"
CALLBACK = f"{PUBLIC}/dashboard/oauth/callback"
OAUTH = {
    "OAUTH_CLIENT_ID": "client-123",
    "OAUTH_CLIENT_SECRET": "secret-456",
    "DASHBOARD_PUBLIC_URL": PUBLIC,
}


@dataclass
class LocalAuthServer:
    """Grants a code per user; each code is redeemable once, for the registered URI only."""

    codes: dict[str, str] = field(default_factory=dict)
    exchanged: list[str] = field(default_factory=list)

    def authorize_url(self, *, state: str, redirect_uri: str) -> str:
        return f"https://auth.test/oauth/authorize?state={state}&redirect_uri={redirect_uri}"

    async def exchange(self, *, code: str, redirect_uri: str) -> str:
        self.exchanged.append(redirect_uri)
        if redirect_uri != CALLBACK or code not in self.codes:
            raise SignInFailed("unknown code")
        return self.codes.pop(code)


@dataclass
class Site:
    client: TestClient
    auth: LocalAuthServer
    identity: LocalIdentity
    clock: FrozenClock

    def grant(self, user: str, role: str = "contributor") -> str:
        code = f"code-{user}-{len(self.auth.codes)}"
        self.auth.codes[code] = self.identity.add_user(user, role=role)
        return code

    def login(self, next_path: str | None = None) -> str:
        params = {"next": next_path} if next_path else {}
        response = self.client.get("/dashboard/oauth/login", params=params, follow_redirects=False)
        assert response.status_code == 302
        return parse_qs(urlsplit(response.headers["location"]).query)["state"][0]

    def callback(self, **params: str) -> Any:
        return self.client.get("/dashboard/oauth/callback", params=params, follow_redirects=False)


def open_site(
    stack: ExitStack, settings: BucketSyncSettings, auth: LocalAuthServer, clock: FrozenClock
) -> Site:
    """A started app with OAuth on `settings`' data directory, signing in through `auth`."""
    identity = LocalIdentity(settings.data_dir / "users.json", org=ORG)
    app = create_app(
        settings,
        store=LocalBucketStore(settings.data_dir, clock=clock),
        identity=identity,
        clock=clock,
        oauth_provider=auth,
    )
    # https: the cookies are Secure once the public URL is https.
    client = stack.enter_context(TestClient(app, base_url="https://testserver"))
    return Site(client, auth, identity, clock)


@pytest.fixture
def site(tmp_path: Path, clock: FrozenClock) -> Iterator[Site]:
    with ExitStack() as stack:
        yield open_site(stack, make_settings(tmp_path / "data", **OAUTH), LocalAuthServer(), clock)


def test_login_sends_the_configured_callback_never_the_request_host(site: Site) -> None:
    response = site.client.get(
        "/dashboard/oauth/login",
        headers={"Host": "evil.example", "X-Forwarded-Host": "evil.example"},
        follow_redirects=False,
    )
    location = parse_qs(urlsplit(response.headers["location"]).query)
    assert location["redirect_uri"] == [CALLBACK]
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "Secure" in cookie and "samesite=lax" in cookie.lower()


def test_a_full_sign_in_posts_as_human_name_with_the_token_kept_server_side(site: Site) -> None:
    code = site.grant("dora")
    state = site.login("/dashboard#/board")
    response = site.callback(code=code, state=state)
    assert response.status_code == 302
    assert response.headers["location"] == "/dashboard#/board"
    sid = site.client.cookies.get(SESSION_COOKIE)
    assert sid and not sid.startswith("bst_")  # a session id, not the token
    assert site.client.get("/dashboard/config.json").json()["oauth_user"] == "dora"
    me = site.client.get("/dashboard/api/v1/me").json()
    assert (me["handle"], me["is_organizer"]) == ("human-dora", False)
    posted = site.client.post(
        "/dashboard/api/v1/messages",
        json={"agent_id": "human-dora", "body": "signed in through the Hub"},
        headers={"X-Agenthub-Dashboard": "1"},
    )
    assert posted.status_code == 201, posted.text
    # Without the page's header a cookie-carried write is refused (no cross-site posts).
    forged = site.client.post(
        "/dashboard/api/v1/messages", json={"agent_id": "human-dora", "body": "csrf"}
    )
    assert forged.status_code == 403
    assert site.client.post("/dashboard/oauth/logout").json() == {"signed_out": True}
    assert site.client.get("/dashboard/api/v1/me").status_code == 401


@pytest.mark.parametrize(
    "target",
    [
        "https://evil.example/",
        "//evil.example",
        "/\\evil.example",
        "/dashboardx",
        "javascript:x",
        "/dashboard/../v1",
        "/dashboard\r\nSet-Cookie: x",
    ],
)
def test_next_never_leaves_the_dashboard(site: Site, target: str) -> None:
    code = site.grant("eve")
    state = site.login(target)
    response = site.callback(code=code, state=state)
    assert response.headers["location"] == "/dashboard"


def test_safe_next_keeps_dashboard_paths() -> None:
    assert safe_next("/dashboard#/channels/eval") == "/dashboard#/channels/eval"
    assert safe_next("/dashboard/?x=1") == "/dashboard/?x=1"
    assert safe_next(None) == "/dashboard"


def failure_of(response: Any) -> str:
    assert response.status_code == 302
    location = urlsplit(response.headers["location"])
    assert location.path == "/dashboard"
    return str(parse_qs(location.query)["signin_error"][0])


def test_a_declined_consent_is_a_message_not_a_server_error(site: Site) -> None:
    state = site.login()
    response = site.callback(error="access_denied", state=state)
    assert "access_denied" in failure_of(response)
    assert SESSION_COOKIE not in site.client.cookies


def test_a_state_from_another_browser_is_refused_and_the_stale_cookie_cleared(
    site: Site,
) -> None:
    code = site.grant("mallory")
    site.login()
    response = site.callback(code=code, state="forged-state")
    assert "does not match" in failure_of(response)
    assert 'agenthub_dash_oauth_state=""' in response.headers["set-cookie"]
    assert site.auth.exchanged == []  # the code was never redeemed


def test_a_state_is_used_once_and_expires(site: Site) -> None:
    state = site.login()
    assert site.callback(code=site.grant("dora"), state=state).headers["location"] == "/dashboard"
    site.client.cookies.set("agenthub_dash_oauth_state", state, path="/dashboard/oauth")
    assert "already used" in failure_of(site.callback(code=site.grant("dora"), state=state))

    late = site.login()
    site.clock.advance(timedelta(minutes=11).total_seconds())
    assert "expired" in failure_of(site.callback(code=site.grant("dora"), state=late))


def test_a_session_ends_when_the_token_lifetime_does(site: Site) -> None:
    state = site.login()
    site.callback(code=site.grant("dora"), state=state)
    assert site.client.get("/dashboard/api/v1/me").status_code == 200
    site.clock.advance(timedelta(hours=8, seconds=1).total_seconds())
    assert site.client.get("/dashboard/api/v1/me").status_code == 401
    assert site.client.get("/dashboard/config.json").json()["oauth_user"] is None


def test_a_code_the_provider_refuses_is_a_message(site: Site) -> None:
    state = site.login()
    assert "unknown code" in failure_of(site.callback(code="nope", state=state))


def test_the_callback_uri_comes_from_configuration_only() -> None:
    assert redirect_uri(None, "acme-board.hf.space,board.acme.org") == (
        "https://acme-board.hf.space/dashboard/oauth/callback"
    )
    assert redirect_uri("http://127.0.0.1:8200/", None) == (
        "http://127.0.0.1:8200/dashboard/oauth/callback"
    )
    assert redirect_uri(None, None) is None


def test_oauth_without_a_public_url_is_a_configuration_error(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path / "data", OAUTH_CLIENT_ID="client-123", OAUTH_CLIENT_SECRET="s"
    )
    with pytest.raises(SettingsError, match="DASHBOARD_PUBLIC_URL or SPACE_HOST"):
        create_app(settings)


def test_without_oauth_the_login_route_does_not_exist(tmp_path: Path) -> None:
    with TestClient(create_app(make_settings(tmp_path / "data"))) as client:
        assert client.get("/dashboard/oauth/login", follow_redirects=False).status_code == 404
