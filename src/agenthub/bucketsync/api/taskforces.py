"""`/v1/taskforces*`: agent-created group workspaces, on agent-collabs' wire."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict

from agenthub.bucketsync.api.openapi import ERRORS, served_as
from agenthub.bucketsync.api.routes import caller_info, hub_of
from agenthub.bucketsync.taskforces import read as taskforces
from agenthub.bucketsync.taskforces import write as taskforcing

router = APIRouter(prefix="/v1", responses=ERRORS)


class TaskforceBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    source: str | None = None
    agent_id: str | None = None
    body: str | None = None


class ContributionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str | None = None
    dest_path: str | None = None
    agent_id: str | None = None
    body: str | None = None
    type: str | None = None


@router.post("/taskforces", status_code=201)
def create_taskforce(body: TaskforceBody, request: Request, response: Response) -> dict[str, Any]:
    """Create a taskforce (201), or update its README as the creator (200)."""
    status, answer = taskforcing.create(
        hub_of(request),
        name=body.name,
        source=body.source,
        agent_id=body.agent_id,
        body=body.body,
        caller_info=caller_info(request),
    )
    response.status_code = status
    return answer


@router.get("/taskforces")
def list_taskforces(request: Request) -> dict[str, Any]:
    return taskforces.list_taskforces(hub_of(request), dict(request.query_params))


@router.get("/taskforces/{name}")
def get_taskforce(name: str, request: Request) -> dict[str, Any]:
    return taskforces.detail(hub_of(request), name)


@router.get("/taskforces/{name}/notes")
def list_notes(name: str, request: Request) -> dict[str, Any]:
    return taskforces.notes(hub_of(request), name, dict(request.query_params))


@router.post("/taskforces/{name}/files", status_code=201)
def contribute(name: str, body: ContributionBody, request: Request) -> dict[str, Any]:
    return taskforcing.contribute(
        hub_of(request),
        name,
        source=body.source,
        dest_path=body.dest_path,
        agent_id=body.agent_id,
        body=body.body,
        type=body.type,
        caller_info=caller_info(request),
    )


@router.get("/taskforces/{name}/files")
def list_files(name: str, request: Request) -> dict[str, Any]:
    return taskforces.files(hub_of(request), name)


@router.get("/taskforces/{name}/files/{path:path}", responses=served_as("application/octet-stream"))
def get_file(name: str, path: str, request: Request) -> Response:
    data, media_type = taskforces.file_bytes(hub_of(request), name, path)
    return Response(data, media_type=media_type)
