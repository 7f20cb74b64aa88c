"""Feed routes (contract §1): GET only, never cached."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import StreamingResponse

from agenthub.contracts.inbox_feed import CURSOR_VERSION
from agenthub.statehub.api.errors import documented
from agenthub.statehub.feed import DEFAULT_LIMIT, MAX_LIMIT, MAX_WAIT_S, FeedService
from agenthub.statehub.snapshot import MAX_PAGE_SIZE, PagedSnapshots, stream

router = APIRouter(prefix="/messages/feed", tags=["feed"])
NO_STORE = {"Cache-Control": "no-store"}
DEFAULT_SNAPSHOT_PAGE = 1000
CURSOR_PATTERN = rf"^{CURSOR_VERSION}:[0-9]{{1,19}}$"


def feed(request: Request) -> FeedService:
    service: FeedService = request.app.state.feed
    return service


Feed = Annotated[FeedService, Depends(feed)]


@router.get("/snapshot", response_model=None, responses=documented(409, 410))
def snapshot(
    request: Request,
    service: Feed,
    page_size: Annotated[
        int | None,
        Query(
            description="page the image: rows per page (additive to v1)",
            json_schema_extra={"minimum": 1, "maximum": MAX_PAGE_SIZE},
        ),
    ] = None,
    page: Annotated[str | None, Query(description="next_page from the previous page")] = None,
) -> StreamingResponse | Response:
    if page_size is None and page is None:
        return StreamingResponse(stream(service), media_type="application/json", headers=NO_STORE)
    paged: PagedSnapshots = request.app.state.paged_snapshots
    size = DEFAULT_SNAPSHOT_PAGE if page_size is None else page_size
    body = paged.first_page(size) if page is None else paged.next_page(page, size)
    return _json(body)


@router.get("", responses=documented(400, 409, 410))
async def page(
    request: Request,
    service: Feed,
    after: Annotated[
        str,
        Query(
            description="the cursor to read after (`v1:0` from the start)",
            json_schema_extra={"pattern": CURSOR_PATTERN},
        ),
    ],
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    wait: Annotated[
        float,
        Query(
            description="long-poll seconds, clamped to 0-55",
            json_schema_extra={"minimum": 0, "maximum": MAX_WAIT_S},
        ),
    ] = 0.0,
    source_instance: str | None = None,
    source_epoch: str | None = None,
) -> Response:
    page = await service.wait_encoded_page(
        request.app.state.wake,
        after,
        limit,
        wait=wait,
        source_instance=source_instance,
        source_epoch=source_epoch,
    )
    return Response(page.body, media_type="application/json", headers=NO_STORE)


def _json(body: dict[str, Any]) -> Response:
    # Feed bodies are plain JSON types already; skipping FastAPI's recursive
    # encoder is most of the serving cost at 5000 changes a page, and orjson
    # encodes in one pass what `json.dumps` took a fifth of a page to.
    return Response(orjson.dumps(body), media_type="application/json", headers=NO_STORE)
