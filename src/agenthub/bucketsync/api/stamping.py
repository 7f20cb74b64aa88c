"""Every request settles the stamps it issued (`StampIssuer.settling`) when it ends.

A stamp holds the multi-folder streams back until its write is visible. A write that
fails, or a request refused after its stamp was issued (a mention check or the journal
raising between stamping and writing), never settles it through `Hub.write_central`;
without this scope the stamp held every watcher on every worker for its whole lease."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from agenthub.bucketsync.core.stamps import StampIssuer


class SettleStamps:
    def __init__(self, app: ASGIApp, *, stamps: StampIssuer) -> None:
        self.app = app
        self.stamps = stamps

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with self.stamps.settling():
            await self.app(scope, receive, send)
