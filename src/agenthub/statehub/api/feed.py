"""Feed routes (contract §1): GET only, never cached."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import StreamingResponse

from agenthub.statehub.feed import DEFAULT_LIMIT, MAX_LIMIT, FeedService

router = APIRouter(prefix="/messages/feed", tags=["feed"])
NO_STORE = {"Cache-Control": "no-store"}


def feed(request: Request) -> FeedService:
    service: FeedService = request.app.state.feed
    return service


Feed = Annotated[FeedService, Depends(feed)]


@router.get("/snapshot")
def snapshot(service: Feed) -> StreamingResponse:
    return StreamingResponse(
        service.snapshot_stream(), media_type="application/json", headers=NO_STORE
    )


@router.get("")
def page(
    service: Feed,
    response: Response,
    after: str,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    source_instance: str | None = None,
    source_epoch: str | None = None,
) -> dict[str, Any]:
    response.headers.update(NO_STORE)
    return service.page(after, limit, source_instance=source_instance, source_epoch=source_epoch)
