"""`/local/buckets/…`: scratch buckets for local mode, shaped like the HF bucket API."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Header, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict
from starlette.concurrency import run_in_threadpool

from agenthub.bucketsync.api.openapi import ERRORS, served_as
from agenthub.bucketsync.api.routes import hub_of
from agenthub.bucketsync.files import scratch

router = APIRouter(prefix="/local/buckets", responses=ERRORS)

# Pieces of a request body are gathered up to this size before one write off the event loop.
WRITE_PIECE = 1 << 20


class CreateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    private: bool = False


@router.post("/{namespace}/{name}", status_code=201)
def create(
    namespace: str,
    name: str,
    request: Request,
    response: Response,
    body: CreateBody | None = None,
    authorization: str | None = Header(None),
) -> dict[str, Any]:
    result = scratch.create(
        hub_of(request),
        authorization,
        f"{namespace}/{name}",
        private=body.private if body else False,
    )
    if not result["created"]:
        response.status_code = 200
    return result


@router.put("/{namespace}/{name}/files/{path:path}", status_code=201)
async def put(
    namespace: str,
    name: str,
    path: str,
    request: Request,
    authorization: str | None = Header(None),
) -> dict[str, Any]:
    """Upload a file of up to MAX_UPLOAD_BYTES; the body is streamed to disk, then placed."""
    receiving = await run_in_threadpool(
        scratch.start_put,
        hub_of(request),
        authorization,
        f"{namespace}/{name}",
        path,
        declared=_declared_size(request),
    )
    try:
        pending: list[bytes] = []
        held = 0
        async for chunk in request.stream():
            pending.append(chunk)
            held += len(chunk)
            if held >= WRITE_PIECE:
                await run_in_threadpool(receiving.write, b"".join(pending))
                pending, held = [], 0
        if pending:
            await run_in_threadpool(receiving.write, b"".join(pending))
        return await run_in_threadpool(receiving.finish)
    except BaseException:
        receiving.abort()
        raise


def _declared_size(request: Request) -> int | None:
    """The body's Content-Length (BodyLimit already refused an unreadable one)."""
    value = request.headers.get("content-length")
    return int(value) if value is not None and value.isdigit() else None


@router.get("/{namespace}/{name}/tree")
def tree(
    namespace: str,
    name: str,
    request: Request,
    prefix: str = "",
    recursive: bool = True,
    authorization: str | None = Header(None),
) -> dict[str, Any]:
    return scratch.tree(
        hub_of(request), authorization, f"{namespace}/{name}", prefix, recursive=recursive
    )


@router.get(
    "/{namespace}/{name}/files/{path:path}", responses=served_as("application/octet-stream")
)
def get(
    namespace: str,
    name: str,
    path: str,
    request: Request,
    authorization: str | None = Header(None),
) -> Response:
    pieces = scratch.get(hub_of(request), authorization, f"{namespace}/{name}", path)
    return StreamingResponse(pieces, media_type="application/octet-stream")
