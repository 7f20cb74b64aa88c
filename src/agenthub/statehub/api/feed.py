"""Feed routes (contract §1): GET only, never cached."""

from __future__ import annotations

import json
from typing import Annotated

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
async def page(
    request: Request,
    service: Feed,
    after: str,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    wait: Annotated[float, Query(description="long-poll seconds, clamped to 0-55")] = 0.0,
    source_instance: str | None = None,
    source_epoch: str | None = None,
) -> Response:
    body = await service.wait_page(
        request.app.state.wake,
        after,
        limit,
        wait=wait,
        source_instance=source_instance,
        source_epoch=source_epoch,
    )
    # The page is plain JSON types already; skipping FastAPI's recursive encoder
    # is most of the serving cost at 5000 changes a page.
    return Response(
        json.dumps(body, separators=(",", ":"), ensure_ascii=False),
        media_type="application/json",
        headers=NO_STORE,
    )
