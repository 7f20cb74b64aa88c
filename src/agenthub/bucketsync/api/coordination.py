"""`/v1/*` routes of coordination (issue 18): experiment claims, directives with acks, and
landscape events (the leaderboard subscription and `GET /v1/landscape`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Header, Request
from pydantic import BaseModel, ConfigDict

from agenthub.bucketsync.api.openapi import ERRORS
from agenthub.bucketsync.api.routes import SourceBody, caller_info, hub_of
from agenthub.bucketsync.claims import read as claims
from agenthub.bucketsync.claims import write as claiming
from agenthub.bucketsync.directives import read as directives
from agenthub.bucketsync.directives import write as directing
from agenthub.bucketsync.landscape import read as landscape
from agenthub.bucketsync.landscape import subscriptions

router = APIRouter(prefix="/v1", responses=ERRORS)


class DirectiveBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent_id: str
    body: str
    supersedes: str | None = None


class LeaderboardSubscribeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str
    notify: str | None = None


@router.post("/claims", status_code=201)
def post_claim(body: SourceBody, request: Request) -> dict[str, Any]:
    return claiming.promote_claim(hub_of(request), body.source, caller_info=caller_info(request))


@router.get("/claims")
def list_claims(request: Request) -> dict[str, Any]:
    return claims.list_claims(hub_of(request), dict(request.query_params))


@router.get("/claims/{filename}")
def get_claim(filename: str, request: Request) -> dict[str, Any]:
    return claims.get_claim(hub_of(request), filename)


@router.post("/directives", status_code=201)
def post_directive(
    body: DirectiveBody, request: Request, authorization: str | None = Header(None)
) -> dict[str, Any]:
    return directing.post_directive(
        hub_of(request),
        agent_id=body.agent_id,
        body=body.body,
        supersedes=body.supersedes,
        authorization=authorization,
        caller_info=caller_info(request),
    )


@router.get("/directives")
def list_directives(request: Request) -> dict[str, Any]:
    return directives.list_directives(hub_of(request), dict(request.query_params))


@router.get("/directives/{filename}")
def get_directive(filename: str, request: Request) -> dict[str, Any]:
    return directives.get_directive(hub_of(request), filename)


@router.post("/directives/{filename}/ack")
def ack_directive(filename: str, body: SourceBody, request: Request) -> dict[str, Any]:
    return directing.ack(
        hub_of(request), filename, source=body.source, caller_info=caller_info(request)
    )


@router.post("/leaderboard/subscribe")
def subscribe_leaderboard(body: LeaderboardSubscribeBody, request: Request) -> dict[str, Any]:
    return subscriptions.subscribe(
        hub_of(request), source=body.source, notify=body.notify, caller_info=caller_info(request)
    )


@router.get("/landscape")
def list_landscape(request: Request) -> dict[str, Any]:
    return landscape.list_events(hub_of(request), dict(request.query_params))
