"""`GET /v1/setup` (a harness's whole setup in one call) and `GET /llms.txt`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Header, Query, Request, Response

from agenthub.bucketsync.agentside.setup import HARNESSES, setup
from agenthub.bucketsync.api import discovery
from agenthub.bucketsync.api.openapi import ERRORS, served_as
from agenthub.bucketsync.api.routes import hub_of
from agenthub.bucketsync.core.naming import validate_agent_id
from agenthub.bucketsync.errors import InvalidQuery

router = APIRouter(responses=ERRORS)


def service_url(request: Request) -> str:
    """This server's base URL as the caller reached it."""
    return str(request.base_url).rstrip("/")


@router.get("/v1/setup")
def harness_setup(
    request: Request,
    harness: str = Query(..., description=" | ".join(HARNESSES)),
    agent_id: str = Query(...),
    authorization: str | None = Header(None),
) -> dict[str, Any]:
    """The MCP server config, the unread hook and the watch recipe for `harness`, filled in
    for this server and `agent_id`. In local mode a Bearer sent here is written into the
    MCP environment as BUCKETSYNC_TOKEN (it is the caller's own token)."""
    if harness not in HARNESSES:
        raise InvalidQuery(
            f"unknown harness {harness!r}", hint=f"use harness={'|'.join(HARNESSES)}"
        )
    validate_agent_id(agent_id)
    s = hub_of(request).settings
    scheme, _, token = (authorization or "").partition(" ")
    return setup(
        harness,
        url=service_url(request),
        agent_id=agent_id,
        scratch_bucket=s.scratch_bucket(agent_id),
        local_storage=s.serves_buckets,
        token=token.strip() if scheme.lower() == "bearer" and token.strip() else None,
    )


@router.get("/llms.txt", responses=served_as("text/markdown"))
def llms_txt(request: Request) -> Response:
    text = discovery.llms_txt(hub_of(request), service_url(request))
    return Response(text, media_type="text/markdown; charset=utf-8")
