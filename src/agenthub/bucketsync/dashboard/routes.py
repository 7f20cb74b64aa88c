"""`/dashboard…` routes: the page and its assets, the `wait=0` proxy, the sign-in flows.

Only HTTP translation here; the rules live in `proxy.py` and `oauth.py`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request, Response
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse
from pydantic import BaseModel, ConfigDict, Field

from agenthub.bucketsync.core.hub import CallerInfo, Hub
from agenthub.bucketsync.dashboard import joblogs, moderation
from agenthub.bucketsync.dashboard.oauth import OAuthFlow
from agenthub.bucketsync.dashboard.proxy import Peer, Proxy, Reply
from agenthub.bucketsync.errors import BucketSyncError, Forbidden, NotFound

ASSETS = Path(__file__).resolve().parent
_ASSET_NAME = re.compile(r"^[a-z][a-z0-9-]*\.(js|css)$")
_MEDIA = {"js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8"}
SESSION_COOKIE = "agenthub_dash_session"
STATE_COOKIE = "agenthub_dash_oauth_state"
# A header a cross-site form cannot send: cookie-authenticated writes must carry it.
WRITE_HEADER = "x-agenthub-dashboard"
POLL_S = 30
SCORE_DECIMALS = 4  # a standalone dashboard's, which cannot read the challenge's setting
# Everything the page loads or calls is its own origin; the Space page may frame it.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'self' https://huggingface.co; base-uri 'none'; "
    "form-action 'self'"
)


# The tab icon, also answered at /favicon.ico (browsers ask for it unprompted).
FAVICON_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
    '<rect width="32" height="32" rx="7" fill="#2563eb"/>'
    '<path d="M9 22V10h4l3 6 3-6h4v12h-3v-7l-4 7-4-7v7z" fill="#fff"/></svg>'
)


@dataclass(frozen=True)
class Branding:
    """The challenge's title and tagline (challenge.yaml `branding:`) for the header."""

    title: str = ""
    tagline: str = ""


def favicon_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/favicon.ico")
    def favicon() -> Response:
        return Response(
            FAVICON_SVG,
            media_type="image/svg+xml",
            headers={"Cache-Control": "public, max-age=86400"},
        )

    return router


def build_router(
    proxy: Proxy,
    oauth: OAuthFlow | None,
    *,
    poll_s: float = POLL_S,
    branding: Branding | None = None,
    hub: Callable[[], Hub] | None = None,
    forward_moderation: bool = False,
) -> APIRouter:
    """The dashboard's routes; organizer moderation runs on `hub` when served in-process,
    or is forwarded through `proxy` to the bucket-sync in front of which a standalone
    dashboard runs (`forward_moderation`)."""
    router = APIRouter(prefix="/dashboard", include_in_schema=False)
    brand = branding or Branding()

    @router.get("")
    @router.get("/")
    def page() -> FileResponse:
        return FileResponse(
            ASSETS / "index.html",
            media_type="text/html; charset=utf-8",
            headers={"Content-Security-Policy": CSP, "Cache-Control": "no-cache"},
        )

    @router.get("/assets/{name}")
    def asset(name: str) -> FileResponse:
        match = _ASSET_NAME.match(name)
        path = ASSETS / name
        if match is None or not path.is_file():
            raise NotFound(f"no dashboard asset {name!r}")
        return FileResponse(path, media_type=_MEDIA[match.group(1)])

    @router.get("/config.json")
    def config(request: Request) -> dict[str, Any]:
        session = oauth.session(request.cookies.get(SESSION_COOKIE)) if oauth else None
        return {
            "poll_s": poll_s,
            "oauth_login": "/dashboard/oauth/login" if oauth else None,
            "oauth_user": session.user if session else None,
            "title": brand.title or None,
            "tagline": brand.tagline or None,
            "score_decimals": hub().settings.score_decimals if hub else SCORE_DECIMALS,
            "moderation": hub is not None or forward_moderation,
        }

    @router.get("/api/v1/{path:path}")
    @router.get("/api/v1")
    async def proxied_get(request: Request, path: str = "") -> Response:
        headers = _auth_headers(request, oauth)
        query = list(request.query_params.multi_items())
        return _reply(await proxy.get(path, query, headers, _peer(request)))

    @router.post("/api/v1/{path:path}")
    async def proxied_post(request: Request, path: str) -> Response:
        headers = _auth_headers(request, oauth)
        if "authorization" not in {k.lower() for k in request.headers}:
            _require_page_header(request)
        return _reply(await proxy.post(path, await request.body(), headers, _peer(request)))

    if oauth is not None:
        _add_oauth_routes(router, oauth)
    if hub is not None:
        _add_moderation_routes(router, hub, oauth)
    elif forward_moderation:
        _add_forwarded_moderation_routes(router, proxy, oauth)
    return router


class VerdictBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    filename: str
    verdict: str
    expected: str = Field(description="the verdict the organizer saw (compare-and-set)")


class HideBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    filename: str
    hidden: bool = True
    reason: str = Field("", max_length=500)


class RevokeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: str


def _add_moderation_routes(
    router: APIRouter, hub: Callable[[], Hub], oauth: OAuthFlow | None
) -> None:
    """An org admin's actions (checked on the server for every call; see moderation.py)."""

    def authorized(request: Request) -> str | None:
        headers = _auth_headers(request, oauth)
        if "authorization" not in {k.lower() for k in request.headers}:
            _require_page_header(request)
        return headers.get("authorization")

    def info(request: Request) -> CallerInfo:
        return CallerInfo(
            ip=request.client.host if request.client else None,
            user_agent=request.headers.get("user-agent"),
        )

    @router.get("/moderation/hidden")
    def hidden() -> dict[str, Any]:
        return {"hidden": moderation.hidden_posts(hub())}

    @router.get("/moderation/job-log/{filename}")
    def job_log(filename: str, request: Request, whole: bool = False) -> Response:
        token = _auth_headers(request, oauth).get("authorization")
        if whole:
            log = joblogs.verification_log(hub(), token, filename)
            return Response(log, media_type="text/plain; charset=utf-8")
        return JSONResponse(joblogs.log_tail(hub(), token, filename))

    @router.post("/moderation/verdict")
    def verdict(body: VerdictBody, request: Request) -> dict[str, Any]:
        return moderation.set_verdict(
            hub(), authorized(request), filename=body.filename, verdict=body.verdict,
            expected=body.expected, info=info(request),
        )  # fmt: skip

    @router.post("/moderation/hide")
    def hide(body: HideBody, request: Request) -> dict[str, Any]:
        return moderation.hide_post(
            hub(), authorized(request), filename=body.filename, hidden=body.hidden,
            reason=body.reason, info=info(request),
        )  # fmt: skip

    @router.post("/moderation/revoke")
    def revoke(body: RevokeBody, request: Request) -> dict[str, Any]:
        return moderation.revoke_user(
            hub(), authorized(request), user=body.user, info=info(request)
        )


def _add_forwarded_moderation_routes(
    router: APIRouter, proxy: Proxy, oauth: OAuthFlow | None
) -> None:
    """The same routes, answered by the upstream bucket-sync's (it checks the organizer
    and audits; it sees this dashboard's address, as for every proxied write)."""

    @router.get("/moderation/hidden")
    async def hidden(request: Request) -> Response:
        headers = _auth_headers(request, oauth)
        return _reply(await proxy.moderation_get("hidden", [], headers, _peer(request)))

    @router.get("/moderation/job-log/{filename}")
    async def job_log(filename: str, request: Request) -> Response:
        headers, query = _auth_headers(request, oauth), list(request.query_params.multi_items())
        path = f"job-log/{filename}"
        return _reply(await proxy.moderation_get(path, query, headers, _peer(request)))

    @router.post("/moderation/{action}")
    async def moderate(action: str, request: Request) -> Response:
        headers = _auth_headers(request, oauth)
        body = await request.body()
        return _reply(await proxy.moderate(action, body, headers, _peer(request)))


def _add_oauth_routes(router: APIRouter, oauth: OAuthFlow) -> None:
    @router.get("/oauth/login")
    def login(next: str | None = None) -> RedirectResponse:
        url, state = oauth.begin(next)
        response = RedirectResponse(url, status_code=302)
        _set_cookie(response, STATE_COOKIE, state, 600, "/dashboard/oauth", oauth.secure)
        return response

    @router.get("/oauth/callback")
    async def callback(
        request: Request,
        code: str | None = None,
        state: str | None = None,
        error: str | None = None,
    ) -> RedirectResponse:
        try:
            sid, target = await oauth.finish(
                code=code,
                state=state,
                cookie_state=request.cookies.get(STATE_COOKIE),
                error=error,
            )
        except BucketSyncError as exc:
            # Back to the page with the reason, and the stale state cookie cleared.
            query = urlencode({"signin_error": exc.message, "hint": exc.hint or ""})
            failed = RedirectResponse(f"/dashboard?{query}", status_code=302)
            failed.delete_cookie(STATE_COOKIE, path="/dashboard/oauth")
            return failed
        response = RedirectResponse(target, status_code=302)
        response.delete_cookie(STATE_COOKIE, path="/dashboard/oauth")
        ttl = int(oauth.session_ttl.total_seconds())
        _set_cookie(response, SESSION_COOKIE, sid, ttl, "/dashboard", oauth.secure)
        return response

    @router.post("/oauth/logout")
    def logout(request: Request) -> dict[str, bool]:
        oauth.end(request.cookies.get(SESSION_COOKIE))
        return {"signed_out": True}


def _set_cookie(
    response: Response, name: str, value: str, max_age: int, path: str, secure: bool
) -> None:
    # Lax, not None: the flow runs top-level (open it in a new tab from an embedded Space).
    response.set_cookie(
        name, value, max_age=max_age, path=path, httponly=True, secure=secure, samesite="lax"
    )


def _require_page_header(request: Request) -> None:
    """A cookie-authenticated write must carry a header a cross-site form cannot send."""
    if request.headers.get(WRITE_HEADER) != "1":
        raise Forbidden(
            "a signed-in write must come from the dashboard page",
            hint=f"send the {WRITE_HEADER}: 1 header",
        )


def _auth_headers(request: Request, oauth: OAuthFlow | None) -> dict[str, str]:
    headers = {k: v for k, v in request.headers.items()}
    if "authorization" not in headers and oauth is not None:
        session = oauth.session(request.cookies.get(SESSION_COOKIE))
        if session is not None:
            headers["authorization"] = f"Bearer {session.token}"
    return headers


def _peer(request: Request) -> Peer:
    return (request.client.host, request.client.port) if request.client else None


def _reply(reply: Reply) -> Response:
    headers = (
        {"Content-Disposition": reply.content_disposition} if reply.content_disposition else {}
    )
    return Response(
        reply.body, status_code=reply.status, media_type=reply.content_type, headers=headers
    )
