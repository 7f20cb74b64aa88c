"""`GET /v1/queue` and `GET /v1/me/quota`: the scoring loop as its users see it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Header, Request

from agenthub.bucketsync.api.openapi import ERRORS
from agenthub.bucketsync.errors import JobsDisabled
from agenthub.bucketsync.scoring import views
from agenthub.bucketsync.scoring.assembly import Scoring

router = APIRouter(prefix="/v1", responses=ERRORS)


def scoring_of(request: Request) -> Scoring:
    scoring: Scoring | None = request.app.state.scoring
    if scoring is None:
        raise JobsDisabled(
            "benchmark jobs are not enabled on this server", hint="JOBS_ENABLED is false"
        )
    return scoring


@router.get("/queue")
def queue(request: Request) -> dict[str, Any]:
    return views.queue(scoring_of(request))


@router.get("/me/quota")
def my_quota(request: Request, authorization: str | None = Header(None)) -> dict[str, Any]:
    return views.my_quota(scoring_of(request), authorization)
