"""`GET /v1/lineage/{name}`: what a work builds on and what builds on it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from agenthub.bucketsync.api.openapi import ERRORS
from agenthub.bucketsync.api.routes import hub_of
from agenthub.bucketsync.results import lineageview

router = APIRouter(prefix="/v1", responses=ERRORS)


@router.get("/lineage/{name:path}")
def lineage_of(name: str, request: Request) -> dict[str, Any]:
    return lineageview.lineage_of(hub_of(request), name, dict(request.query_params))
