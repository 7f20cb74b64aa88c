"""The real `HfOAuthProvider` against a local stand-in for the Hub's OAuth endpoints (the
HF boundary): the authorize URL it builds and the code exchange it performs
(hf-spaces-facts.md §1.4)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi import FastAPI, Form, Header
from fastapi.responses import JSONResponse

from agenthub.bucketsync.dashboard.oauth import HfOAuthProvider
from agenthub.bucketsync.errors import SignInFailed
from tests.support.servers import live_server

CALLBACK = "https://acme-board.hf.space/dashboard/oauth/callback"


def token_endpoint() -> FastAPI:
    app = FastAPI()

    @app.post("/oauth/token")
    def token(
        grant_type: str = Form(...),
        code: str = Form(...),
        redirect_uri: str = Form(...),
        client_id: str = Form(...),
        authorization: str = Header(""),
    ) -> JSONResponse:
        expected = "Basic " + base64.b64encode(b"client-1:secret-1").decode()
        ok = (
            grant_type == "authorization_code"
            and code == "good-code"
            and redirect_uri == CALLBACK
            and client_id == "client-1"
            and authorization == expected
        )
        if not ok:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        return JSONResponse({"access_token": "hf_oauth_abc", "token_type": "bearer"})

    return app


@pytest.fixture(scope="module")
def provider() -> Iterator[HfOAuthProvider]:
    with live_server(token_endpoint()) as base:
        yield HfOAuthProvider(
            provider_url=base + "/", client_id="client-1", client_secret="secret-1",
            scopes="openid profile email",
        )  # fmt: skip


def test_the_authorize_url_asks_for_a_code_with_our_state_and_callback(
    provider: HfOAuthProvider,
) -> None:
    url = urlsplit(provider.authorize_url(state="s-1", redirect_uri=CALLBACK))
    assert url.path == "/oauth/authorize"
    query = parse_qs(url.query)
    assert query == {
        "client_id": ["client-1"],
        "redirect_uri": [CALLBACK],
        "response_type": ["code"],
        "scope": ["openid profile email"],
        "state": ["s-1"],
    }


def test_a_good_code_exchanges_with_basic_client_auth(provider: HfOAuthProvider) -> None:
    token = asyncio.run(provider.exchange(code="good-code", redirect_uri=CALLBACK))
    assert token == "hf_oauth_abc"


def test_a_refused_code_is_a_sign_in_failure(provider: HfOAuthProvider) -> None:
    with pytest.raises(SignInFailed, match="refused the code \\(HTTP 400\\)"):
        asyncio.run(provider.exchange(code="stale", redirect_uri=CALLBACK))


def test_an_unreachable_provider_is_a_sign_in_failure() -> None:
    provider = HfOAuthProvider(
        provider_url="http://127.0.0.1:9", client_id="c", client_secret="s", scopes="openid"
    )
    with pytest.raises(SignInFailed, match="did not answer"):
        asyncio.run(provider.exchange(code="x", redirect_uri=CALLBACK))
