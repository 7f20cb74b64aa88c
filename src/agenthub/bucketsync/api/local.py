"""`/local/buckets/…`: scratch buckets for local mode, shaped like the HF bucket API."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Header, Request, Response
from pydantic import BaseModel, ConfigDict
from starlette.concurrency import run_in_threadpool

from agenthub.bucketsync.api.openapi import ERRORS, served_as
from agenthub.bucketsync.api.routes import hub_of
from agenthub.bucketsync.files import scratch

router = APIRouter(prefix="/local/buckets", responses=ERRORS)


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
    data = await request.body()
    return await run_in_threadpool(
        scratch.put, hub_of(request), authorization, f"{namespace}/{name}", path, data
    )


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
    data = scratch.get(hub_of(request), authorization, f"{namespace}/{name}", path)
    return Response(data, media_type="application/octet-stream")
