"""Inbox routes: `/messages/…`."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from agenthub.statehub.api.bodies import json_response, message_json, messages_json, receipt_json
from agenthub.statehub.api.errors import documented
from agenthub.statehub.inbox import MAX_LIST_LIMIT, InboxService, ListQuery
from agenthub.statehub.models import AgentMessage, MessageReceipt
from agenthub.statehub.schemas import (
    KIND_PATTERN,
    SLUG_SCHEMA,
    MessageCreate,
    MessageRead,
    ReceiptRead,
    ReplyCreate,
)

router = APIRouter(prefix="/messages", tags=["messages"])


def inbox(request: Request) -> InboxService:
    service: InboxService = request.app.state.inbox
    return service


Inbox = Annotated[InboxService, Depends(inbox)]
Slug = Annotated[str, Query(json_schema_extra=SLUG_SCHEMA)]
Kind = Annotated[str, Query(json_schema_extra={"pattern": KIND_PATTERN})]
NOT_FOUND = documented(404)
POST = documented(409)  # an Idempotency-Key reused for another request


def answer_of(made: object) -> tuple[int, bytes]:
    """The status and JSON body a POST answers for what its write made: a message it
    created (send, reply) or the receipt it stamped (ack). The routes answer with it, and
    a write carrying an Idempotency-Key stores it before its commit (see
    `statehub.idempotency`), so a retry gets these very bytes."""
    if isinstance(made, AgentMessage):
        return 201, message_json(made)
    if isinstance(made, MessageReceipt):
        return 200, receipt_json(made)
    raise TypeError(f"no POST answers a {type(made).__name__}")


def answer(made: object) -> Response:
    status, body = answer_of(made)
    return json_response(body, status_code=status)


# The two hot routes are `async def` returning encoded bytes (see `bodies`): the
# database work and the encoding run in one threadpool hop, and `response_model`
# documents the body without FastAPI validating it again.


# The contract's route is `/messages/`; without the slash Starlette answered a bare 307
# that `curl -X POST` prints as nothing. Both spellings serve, the schema names one.
@router.post("", status_code=201, include_in_schema=False)
@router.post("/", status_code=201, response_model=MessageRead, responses=POST)
async def send_message(data: MessageCreate, request: Request) -> Response:
    service = inbox(request)
    return await run_in_threadpool(lambda: answer(service.send(data)))


@router.get("", include_in_schema=False)
@router.get("/", response_model=list[MessageRead])
async def list_messages(
    request: Request,
    to_agent: Slug | None = None,
    from_agent: Slug | None = None,
    unread_only: bool = False,
    kind: Kind | None = None,
    include_archived: bool = False,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = 50,
    peek: Annotated[
        bool,
        Query(description="Return the unread set without stamping `delivered_at`."),
    ] = False,
) -> Response:
    query = ListQuery(
        to_agent=to_agent,
        from_agent=from_agent,
        unread_only=unread_only,
        kind=kind,
        include_archived=include_archived,
        limit=limit,
        peek=peek,
    )
    service = inbox(request)
    return json_response(
        await run_in_threadpool(lambda: messages_json(service.list_messages(query)))
    )


@router.get("/{message_id}", response_model=MessageRead, responses=NOT_FOUND)
def get_message(message_id: uuid.UUID, service: Inbox) -> MessageRead:
    return MessageRead.model_validate(service.get(message_id))


@router.get("/{message_id}/thread", response_model=list[MessageRead], responses=NOT_FOUND)
def get_thread(message_id: uuid.UUID, service: Inbox) -> list[MessageRead]:
    return [MessageRead.model_validate(m) for m in service.thread(message_id)]


@router.post(
    "/{message_id}/reply",
    status_code=201,
    response_model=MessageRead,
    responses={**NOT_FOUND, **POST},
)
def reply(message_id: uuid.UUID, data: ReplyCreate, service: Inbox) -> Response:
    return answer(service.reply(message_id, data))


@router.patch("/{message_id}/read", response_model=MessageRead, responses=NOT_FOUND)
def mark_read(message_id: uuid.UUID, service: Inbox, reader: Slug | None = None) -> MessageRead:
    return MessageRead.model_validate(service.mark_read(message_id, reader))


@router.post("/{message_id}/ack", response_model=ReceiptRead, responses={**NOT_FOUND, **POST})
def acknowledge(message_id: uuid.UUID, service: Inbox, agent: Slug) -> Response:
    return answer(service.acknowledge(message_id, agent))


@router.patch("/{message_id}/archive", response_model=MessageRead, responses=NOT_FOUND)
def archive(message_id: uuid.UUID, service: Inbox) -> MessageRead:
    return MessageRead.model_validate(service.archive(message_id))
