"""`/v1/*` routes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Header, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agenthub.bucketsync.agents import read as agents
from agenthub.bucketsync.agents import write as registration
from agenthub.bucketsync.api import discovery, health
from agenthub.bucketsync.api.answers import json_answer
from agenthub.bucketsync.api.openapi import BUDGET_ERROR, ERRORS
from agenthub.bucketsync.api.scoring import scoring_of
from agenthub.bucketsync.board import read as board
from agenthub.bucketsync.board import write as messages
from agenthub.bucketsync.core.hub import CallerInfo, Hub
from agenthub.bucketsync.errors import JobsDisabled
from agenthub.bucketsync.files import sync
from agenthub.bucketsync.live import boardview
from agenthub.bucketsync.live import digest as snapshot
from agenthub.bucketsync.results import write as results
from agenthub.bucketsync.scoring import resubmit
from agenthub.bucketsync.scoring import views as scoring_views

router = APIRouter(prefix="/v1", responses=ERRORS)


def hub_of(request: Request) -> Hub:
    hub: Hub = request.app.state.hub
    return hub


def caller_info(request: Request) -> CallerInfo:
    return CallerInfo(
        ip=request.client.host if request.client else None,
        user_agent=request.headers.get("user-agent"),
    )


class RegisterBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent_id: str
    model: str = ""
    harness: str = ""
    tools: list[str] = Field(default_factory=list)
    bio_source: str | None = None
    force: bool = False


class MessageBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str | None = None
    agent_id: str | None = None
    body: str | None = None
    type: str | None = None
    refs: str | list[str] | None = None
    broadcast: bool = False
    channel: str | None = None


@router.get("")
def describe(request: Request) -> dict[str, Any]:
    return discovery.describe(hub_of(request))


@router.get("/healthz")
def healthz(request: Request, response: Response) -> dict[str, Any]:
    report = health.report(hub_of(request))
    if report["status"] == "degraded":
        response.status_code = 503
    return report


@router.post("/agents/register", status_code=201)
def register(
    body: RegisterBody, request: Request, authorization: str | None = Header(None)
) -> dict[str, Any]:
    return registration.register(
        hub_of(request),
        authorization=authorization,
        agent_id=body.agent_id,
        model=body.model,
        harness=body.harness,
        tools=body.tools,
        bio_source=body.bio_source,
        force=body.force,
        caller_info=caller_info(request),
    )


@router.get("/agents")
def list_agents(request: Request) -> dict[str, Any]:
    return agents.list_agents(hub_of(request), dict(request.query_params))


@router.get("/agents/{agent_id}")
def get_agent(agent_id: str, request: Request) -> dict[str, Any]:
    return agents.get_agent(hub_of(request), agent_id)


@router.post("/messages", status_code=201, response_model=dict[str, Any])
def post_message(
    body: MessageBody, request: Request, authorization: str | None = Header(None)
) -> Response:
    answer = messages.promote(
        hub_of(request),
        messages.MessageRequest(
            source=body.source,
            agent_id=body.agent_id,
            body=body.body,
            type=body.type,
            refs=body.refs,
            broadcast=body.broadcast,
            channel=body.channel,
        ),
        authorization=authorization,
        caller_info=caller_info(request),
    )
    return json_answer(answer, status_code=201)


@router.get("/messages")
def list_messages(request: Request) -> dict[str, Any]:
    return board.list_messages(hub_of(request), dict(request.query_params))


@router.get("/messages/{filename}")
def get_message(filename: str, request: Request) -> dict[str, Any]:
    return board.get_message(hub_of(request), filename)


@router.get("/digest", response_model=dict[str, Any], responses=BUDGET_ERROR)
def digest(
    request: Request,
    as_: str | None = Query(None, alias="as"),
    since: str | None = Query(None),
    after: str | None = Query(None),
    budget_tokens: int | None = Query(None, ge=1),
) -> Any:
    hub = hub_of(request)
    if budget_tokens is None:
        return snapshot.digest(hub, as_handle=as_, since=since, after=after)
    # Sent as packed: the bytes the budget measured are the bytes on the wire.
    packed = snapshot.budgeted(
        hub, as_handle=as_, since=since, after=after, budget_tokens=budget_tokens
    )
    return Response(packed, media_type="application/json")


class SourceBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str


@router.get("/me")
def me(request: Request, authorization: str | None = Header(None)) -> dict[str, Any]:
    return agents.me(hub_of(request), authorization)


@router.post("/results", status_code=201)
def post_result(body: SourceBody, request: Request) -> dict[str, Any]:
    # Read off the request rather than declared: only a baseline result needs a token, and
    # the route's documented schema stays what every agent client already knows.
    return results.promote_result(
        hub_of(request),
        body.source,
        caller_info=caller_info(request),
        authorization=request.headers.get("authorization"),
    )


@router.get("/results")
def list_results(request: Request) -> dict[str, Any]:
    return results.list_results(hub_of(request), dict(request.query_params))


@router.get("/results/{filename}")
def get_result(filename: str, request: Request) -> dict[str, Any]:
    return scoring_views.result(hub_of(request), request.app.state.scoring, filename)


@router.post("/results/{filename}:reverify", status_code=202)
def reverify(
    filename: str, request: Request, authorization: str | None = Header(None)
) -> dict[str, Any]:
    """Re-submit your result for verification after the platform failed its verification
    (`platform_error` after the retries, or a submission that was missing then)."""
    verifier = scoring_of(request).verifier
    if verifier is None:
        raise JobsDisabled(
            "this server runs no verifier", hint="VERIFIER_ENABLED is false; ask the organizer"
        )
    return resubmit.resubmit(verifier, authorization, filename, caller_info=caller_info(request))


class ArtifactsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str
    dest_slug: str


class SharedBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str
    dest_path: str


@router.post("/artifacts:sync")
def sync_artifacts(body: ArtifactsBody, request: Request) -> dict[str, Any]:
    return sync.sync_artifacts(
        hub_of(request), body.source, body.dest_slug, caller_info=caller_info(request)
    )


@router.post("/shared-resources:sync")
def sync_shared(body: SharedBody, request: Request) -> dict[str, Any]:
    return sync.sync_shared(
        hub_of(request), body.source, body.dest_path, caller_info=caller_info(request)
    )


@router.get("/leaderboard", response_model=dict[str, Any])
def get_leaderboard(request: Request) -> Any:
    answer = boardview.leaderboard_view(hub_of(request), dict(request.query_params))
    if isinstance(answer, boardview.Download):
        return Response(
            answer.body,
            media_type=answer.media_type,
            headers={"Content-Disposition": f'attachment; filename="{answer.filename}"'},
        )
    return answer


class JobBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent_id: str
    submission_prefix: str
    run_prefix: str


@router.post("/jobs:run", status_code=202)
def jobs_run(
    request: Request,
    raw: dict[str, Any] | None = Body(None),
    authorization: str | None = Header(None),
) -> dict[str, Any]:
    scoring = scoring_of(request)  # before the body shape: a disabled endpoint says so first
    try:
        body = JobBody.model_validate(raw or {})
    except ValidationError as exc:
        raise RequestValidationError(
            [{**err, "loc": ("body", *err["loc"])} for err in exc.errors()]
        ) from None
    result: dict[str, Any] = scoring.jobs.run_for_agent(
        authorization=authorization,
        agent_id=body.agent_id,
        submission_prefix=body.submission_prefix,
        run_prefix=body.run_prefix,
        caller_info=caller_info(request),
    )
    return result
