"""`/v1/*` routes of the challenge's phases: the schedule, the final leaderboard, final
entries; and the middleware that announces a phase change on the first request after it
when the boundary timer (`phases.timer`) has not (the server was down, the store failed)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from agenthub.bucketsync.api.openapi import ERRORS
from agenthub.bucketsync.api.routes import SourceBody, caller_info, hub_of
from agenthub.bucketsync.core.hub import Hub
from agenthub.bucketsync.live import final
from agenthub.bucketsync.phases import announce, finals, schedule

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1", responses=ERRORS)


@router.get("/phases")
def phases(request: Request) -> dict[str, Any]:
    """The schedule, the current phase and the time left (`phase: null` without phases)."""
    hub = hub_of(request)
    return {"phase": schedule.describe(hub.settings, hub.clock.now())}


@router.get("/leaderboard/final")
def final_leaderboard(request: Request) -> dict[str, Any]:
    return final.final_board(hub_of(request))


@router.get("/finals/{agent_id}")
def final_entries(agent_id: str, request: Request) -> dict[str, Any]:
    hub = hub_of(request)
    marked = finals.marked(hub, agent_id)
    return {
        "agent": agent_id,
        "marked": marked,
        "max": hub.settings.final_entries_max,
        "selection": "marked" if marked else "best_public",
    }


@router.post("/results/{filename}:final")
def mark_final(filename: str, body: SourceBody, request: Request) -> dict[str, Any]:
    return finals.change(
        hub_of(request), filename, source=body.source, final=True, caller_info=caller_info(request)
    )


@router.delete("/results/{filename}:final")
def unmark_final(filename: str, body: SourceBody, request: Request) -> dict[str, Any]:
    return finals.change(
        hub_of(request), filename, source=body.source, final=False, caller_info=caller_info(request)
    )


class PhaseEvents:
    """Announce passed phase boundaries before serving a `/v1` request (off the event
    loop, and only when one is due: the check itself does no I/O). A failure is logged;
    the request is served all the same and the next one tries again."""

    def __init__(self, app: ASGIApp, hub: Hub) -> None:
        self.app = app
        self.hub = hub

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1") and announce.due(self.hub):
            try:
                await run_in_threadpool(announce.observe, self.hub)
            except Exception:
                log.exception("phase events could not be announced")
        await self.app(scope, receive, send)
