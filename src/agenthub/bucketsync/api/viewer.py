"""Who reads: every request's `Authorization` header noted for staged disclosure
(`results/embargo.py`), so a result's author and the organizers see its withheld
method on any route while everyone else sees the score alone. Tokenless reads stay
tokenless: the header is read only if a withheld result is about to be shown."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from agenthub.bucketsync.results.embargo import viewing


class ViewerNote:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with viewing(Headers(scope=scope).get("authorization")):
            await self.app(scope, receive, send)
