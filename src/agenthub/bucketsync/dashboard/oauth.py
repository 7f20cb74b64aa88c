""" "Sign in with Hugging Face" for the dashboard, written for our needs rather than
huggingface_hub's FastAPI helper (hf-spaces-facts.md §2.6: open redirect, 500 on a declined
consent, http redirect URIs behind the Spaces proxy, tokens in a readable cookie).

- The redirect URI is never built from the request: it is the configured public URL or
  the first `SPACE_HOST` entry, always https on Spaces.
- `state` is one-use, expires, and must match the browser's state cookie.
- After sign-in only a random session id goes to the browser; the access token stays here.
- `next` is a local dashboard path or nothing (no open redirect).
- A declined consent (`?error=`) is a clear message, not a server error.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol
from urllib.parse import urlencode

import httpx

from agenthub.bucketsync.dashboard.signins import MemorySignIns, SignIns
from agenthub.bucketsync.errors import InvalidRequest, SignInFailed, Unauthorized
from agenthub.bucketsync.identity.base import Identity
from agenthub.clock import Clock

CALLBACK_PATH = "/dashboard/oauth/callback"
DEFAULT_NEXT = "/dashboard"
STATE_TTL = timedelta(minutes=10)


class OAuthProvider(Protocol):
    def authorize_url(self, *, state: str, redirect_uri: str) -> str:
        """Where to send the browser to ask for consent."""
        ...

    async def exchange(self, *, code: str, redirect_uri: str) -> str:
        """Trade an authorization code for an access token; raise `SignInFailed`."""
        ...


class HfOAuthProvider:
    """The Hub's authorization-code flow (hf-spaces-facts.md §1.4)."""

    def __init__(
        self, *, provider_url: str, client_id: str, client_secret: str, scopes: str
    ) -> None:
        self._base = provider_url.rstrip("/")
        self._client_id = client_id
        self._secret = client_secret
        self._scopes = scopes

    def authorize_url(self, *, state: str, redirect_uri: str) -> str:
        query = urlencode(
            {
                "client_id": self._client_id,
                "redirect_uri": redirect_uri,
                "response_type": "code",
                "scope": self._scopes,
                "state": state,
            }
        )
        return f"{self._base}/oauth/authorize?{query}"

    async def exchange(self, *, code: str, redirect_uri: str) -> str:
        basic = base64.b64encode(f"{self._client_id}:{self._secret}".encode()).decode()
        try:
            async with httpx.AsyncClient(timeout=15) as client:
                response = await client.post(
                    f"{self._base}/oauth/token",
                    data={
                        "grant_type": "authorization_code",
                        "code": code,
                        "redirect_uri": redirect_uri,
                        "client_id": self._client_id,
                    },
                    headers={"Authorization": f"Basic {basic}"},
                )
        except httpx.HTTPError as exc:
            raise SignInFailed(
                f"the sign-in provider did not answer: {exc}", hint="try signing in again"
            ) from exc
        token: object = None
        if response.status_code == 200:
            try:
                payload = response.json()
            except ValueError:
                payload = None
            token = payload.get("access_token") if isinstance(payload, dict) else None
        if not isinstance(token, str) or not token:
            raise SignInFailed(
                f"the sign-in provider refused the code (HTTP {response.status_code})",
                hint="start again from the dashboard's sign-in button",
            )
        return token


def redirect_uri(public_url: str | None, space_host: str | None) -> str | None:
    """The one callback URL the provider may send users back to, from configuration only."""
    if public_url:
        return public_url.rstrip("/") + CALLBACK_PATH
    if space_host:
        host = space_host.split(",")[0].strip()  # a custom domain makes it a list
        if host:
            return f"https://{host}{CALLBACK_PATH}"
    return None


def safe_next(value: str | None) -> str:
    """Only a path inside the dashboard; anything else (other hosts, `//evil`, `/\\evil`,
    schemes) falls back to the dashboard's front page."""
    if not value or not value.startswith("/dashboard"):
        return DEFAULT_NEXT
    if "\\" in value or "//" in value or any(ord(ch) < 0x20 for ch in value):
        return DEFAULT_NEXT
    if ".." in value.split("#", 1)[0].split("?", 1)[0]:
        return DEFAULT_NEXT
    rest = value[len("/dashboard") :]
    if rest and rest[0] not in "/?#":
        return DEFAULT_NEXT
    return value


@dataclass(frozen=True)
class Session:
    user: str
    token: str
    expires: datetime


STATE, SESSION = "state", "session"


class OAuthFlow:
    """Pending states and signed-in sessions, kept in `signins` (this process by default;
    Redis when the bus is configured, so every worker shares them: `signins.py`)."""

    def __init__(
        self,
        provider: OAuthProvider,
        identity: Identity,
        clock: Clock,
        *,
        callback_url: str,
        session_ttl: timedelta = timedelta(hours=8),
        signins: SignIns | None = None,
    ) -> None:
        self.provider = provider
        self.identity = identity
        self.clock = clock
        self.callback_url = callback_url
        self.session_ttl = session_ttl
        self.secure = callback_url.startswith("https://")
        self.signins: SignIns = signins or MemorySignIns(clock)

    def begin(self, next_path: str | None) -> tuple[str, str]:
        """Returns (authorize URL, state); the state also goes into the browser's cookie."""
        state = secrets.token_urlsafe(24)
        expires = self.clock.now() + STATE_TTL
        self.signins.put(STATE, state, {"next": safe_next(next_path)}, expires)
        return self.provider.authorize_url(state=state, redirect_uri=self.callback_url), state

    async def finish(
        self,
        *,
        code: str | None,
        state: str | None,
        cookie_state: str | None,
        error: str | None,
    ) -> tuple[str, str]:
        """Returns (session id, next path)."""
        if error:
            raise SignInFailed(
                f"sign-in was not completed: {error}",
                hint="sign in again and accept the consent screen",
            )
        if not state or not cookie_state or not secrets.compare_digest(state, cookie_state):
            raise SignInFailed(
                "the sign-in state does not match this browser",
                hint="start again from the dashboard's sign-in button (open it in a new tab "
                "when the dashboard is embedded)",
            )
        pending = self.signins.take(STATE, state)
        if pending is None:
            raise SignInFailed(
                "the sign-in attempt expired or was already used",
                hint="start again from the dashboard's sign-in button",
            )
        if not code:
            raise InvalidRequest("the callback carries no code", hint="start the sign-in again")
        token = await self.provider.exchange(code=code, redirect_uri=self.callback_url)
        try:
            caller = self.identity.whoami(token)
        except Unauthorized as exc:
            raise SignInFailed(
                "the provider's token was not accepted", hint="sign in again"
            ) from exc
        sid = secrets.token_urlsafe(32)
        expires = self.clock.now() + self.session_ttl
        record = {"user": caller.user, "token": token, "expires": expires.isoformat()}
        self.signins.put(SESSION, sid, record, expires)
        return sid, pending.get("next", DEFAULT_NEXT)

    def session(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        found = self.signins.get(SESSION, sid)
        if found is None:
            return None
        expires = datetime.fromisoformat(found["expires"])
        if expires <= self.clock.now():
            self.signins.drop(SESSION, sid)
            return None
        return Session(found["user"], found["token"], expires)

    def end(self, sid: str | None) -> None:
        if sid:
            self.signins.drop(SESSION, sid)
