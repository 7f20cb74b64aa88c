"""`/v1/traces`, `/v1/stats` and the `share_trace.py` client download (seed §10)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict

from agenthub.bucketsync.api.openapi import ERRORS, served_as
from agenthub.bucketsync.api.routes import caller_info, hub_of
from agenthub.bucketsync.traces import read as traces
from agenthub.bucketsync.traces.write import promote_trace

router = APIRouter(prefix="/v1", responses=ERRORS)
CLIENT = Path(__file__).resolve().parent.parent / "clients" / "share_trace.py"


class TraceBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str
    share: str | None = None


@router.post("/traces", status_code=201)
def promote(body: TraceBody, request: Request) -> dict[str, Any]:
    return promote_trace(hub_of(request), body.source, body.share, caller_info=caller_info(request))


@router.get("/traces")
def list_traces(request: Request) -> dict[str, Any]:
    return traces.list_traces(hub_of(request), dict(request.query_params))


@router.get("/traces/{agent_id}/{session}")
def get_trace(agent_id: str, session: str, request: Request) -> dict[str, Any]:
    return traces.get_trace(hub_of(request), agent_id, session)


@router.get("/stats")
def stats(request: Request) -> dict[str, Any]:
    return traces.stats(hub_of(request))


@router.get("/share_trace.py", responses=served_as("text/x-python"))
def share_trace_client() -> Response:
    # Served byte-for-byte, so `python3 share_trace.py` works straight after a download.
    return Response(CLIENT.read_bytes(), media_type="text/x-python; charset=utf-8")
