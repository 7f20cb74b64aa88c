"""`/state/health`."""

from __future__ import annotations

from fastapi import APIRouter, Request

from agenthub.statehub.schemas import Health

router = APIRouter(tags=["health"])


@router.get("/state/health", response_model=Health)
def health(request: Request) -> Health:
    state = request.app.state
    return Health(
        status="ok",
        instance_label=state.instance_label,
        database=state.db.engine.dialect.name,
        high_water=state.feed.high_water_cursor() if getattr(state, "feed", None) else None,
    )
