"""`X-RateLimit-Limit`, `-Remaining` and `-Reset` on every answer a limiter had a say in.

The limiters (`core/limiter.py`, in-process or Redis) report their windows' standing into
a per-request note; this middleware opens the note and copies the tightest window into the
response headers, on a 2xx and on the 429 alike. A request no limiter saw gets none."""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agenthub.bucketsync.core.limiter import noting_quotas


class RateLimitHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with noting_quotas() as note:

            async def stamped(message: Message) -> None:
                if message["type"] == "http.response.start" and note.quota is not None:
                    headers = MutableHeaders(scope=message)
                    for name, value in note.quota.headers().items():
                        headers[name] = value
                await send(message)

            await self.app(scope, receive, stamped)
