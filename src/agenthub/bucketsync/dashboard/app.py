"""Mounting the dashboard: inside bucket-sync (`install`), or standalone in front of any
bucket-sync URL (`create_dashboard_app`, behind `agenthub dashboard serve`)."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from agenthub.apidocs import serve_docs
from agenthub.bucketsync.api import errors
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.dashboard.oauth import (
    HfOAuthProvider,
    OAuthFlow,
    OAuthProvider,
    redirect_uri,
)
from agenthub.bucketsync.dashboard.proxy import Peer, Proxy
from agenthub.bucketsync.dashboard.routes import POLL_S, Branding, build_router, favicon_router
from agenthub.bucketsync.dashboard.signins import SignIns
from agenthub.bucketsync.identity.base import Identity
from agenthub.bucketsync.settings import BucketSyncSettings, SettingsError
from agenthub.clock import Clock

PROXY_TIMEOUT_S = 20.0


def oauth_from_settings(
    settings: BucketSyncSettings,
    identity: Identity,
    clock: Clock,
    *,
    provider: OAuthProvider | None = None,
    signins: SignIns | None = None,
) -> OAuthFlow | None:
    """HF sign-in when the Space's OAuth app is configured; None otherwise (token sign-in).
    `provider` replaces the Hub's authorization server (tests use a local one)."""
    if not settings.oauth_client_id:
        return None
    callback = redirect_uri(settings.dashboard_public_url, settings.space_host)
    if callback is None or not settings.oauth_client_secret:
        raise SettingsError(
            "OAUTH_CLIENT_ID is set but the dashboard cannot sign people in: it needs "
            "OAUTH_CLIENT_SECRET and a public URL (DASHBOARD_PUBLIC_URL or SPACE_HOST)"
        )
    provider = provider or HfOAuthProvider(
        provider_url=settings.openid_provider_url,
        client_id=settings.oauth_client_id,
        client_secret=settings.oauth_client_secret.get_secret_value(),
        scopes=settings.oauth_scopes,
    )
    return OAuthFlow(provider, identity, clock, callback_url=callback, signins=signins)


def install(
    app: FastAPI,
    *,
    oauth: OAuthFlow | None = None,
    poll_s: float = POLL_S,
    branding: Branding | None = None,
) -> None:
    """Serve `/dashboard` from the bucket-sync app itself; the proxy calls the app
    in-process, so the page is same-origin and no socket is involved."""

    def client(peer: Peer) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app, client=peer or ("127.0.0.1", 123)),
            base_url="http://bucket-sync.internal",
            timeout=PROXY_TIMEOUT_S,
        )

    def hub() -> Hub:
        served: Hub = app.state.hub
        return served

    router = build_router(Proxy(client), oauth, poll_s=poll_s, branding=branding, hub=hub)
    app.include_router(router)
    app.include_router(favicon_router())


def create_dashboard_app(upstream: str, *, poll_s: float = POLL_S) -> FastAPI:
    """The dashboard alone, proxying to the bucket-sync at `upstream` (token sign-in)."""
    base = upstream.rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise SettingsError(f"upstream {upstream!r} is not an http(s) URL, e.g. http://host:8300")

    def client(peer: Peer) -> httpx.AsyncClient:
        # Another server: it sees this proxy's address (it trusts no forwarded header).
        return httpx.AsyncClient(base_url=base, timeout=PROXY_TIMEOUT_S)

    app = FastAPI(title="agenthub dashboard", version="1", docs_url=None, redoc_url=None)
    serve_docs(app)
    errors.install(app)
    app.include_router(build_router(Proxy(client), None, poll_s=poll_s, forward_moderation=True))
    app.include_router(favicon_router())
    return app
