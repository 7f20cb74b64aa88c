"""`/healthz`: cursor, high water, lag, read mode and the follower's last error."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from agenthub.hubcore.freshness import FreshnessReport

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz(request: Request, response: Response) -> dict[str, Any]:
    report: FreshnessReport = request.app.state.freshness
    response.headers["Cache-Control"] = "no-store"
    return report.health()
