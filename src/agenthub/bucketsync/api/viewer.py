"""Who reads: every request's `Authorization` header noted for staged disclosure
(`results/embargo.py`), so a result's author and the organizers see its withheld
method on any route while everyone else sees the score alone. Tokenless reads stay
tokenless: the header is read only if a withheld result is about to be shown."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from agenthub.bucketsync.results.embargo import viewing


def note_viewer(app: ASGIApp) -> ASGIApp:
    """The middleware (`app.add_middleware(note_viewer)`); anything but HTTP reads as
    nobody in particular."""

    async def noted(scope: Scope, receive: Receive, send: Send) -> None:
        authorization = (
            Headers(scope=scope).get("authorization") if scope["type"] == "http" else None
        )
        with viewing(authorization):
            await app(scope, receive, send)

    return noted
