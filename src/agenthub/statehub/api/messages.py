"""Inbox routes: `/messages/…`."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from agenthub.statehub.inbox import MAX_LIST_LIMIT, InboxService, ListQuery, MessageRow
from agenthub.statehub.schemas import (
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


@router.post("/", status_code=201, response_model=MessageRead)
def send_message(data: MessageCreate, service: Inbox) -> MessageRead:
    return MessageRead.model_validate(service.send(data))


@router.get("/", response_model=list[MessageRead])
def list_messages(
    service: Inbox,
    to_agent: str | None = None,
    from_agent: str | None = None,
    unread_only: bool = False,
    kind: str | None = None,
    include_archived: bool = False,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = 50,
) -> list[MessageRow]:
    query = ListQuery(
        to_agent=to_agent,
        from_agent=from_agent,
        unread_only=unread_only,
        kind=kind,
        include_archived=include_archived,
        limit=limit,
    )
    # Rows straight to the response model: validated once, by `response_model`.
    return service.list_messages(query)


@router.get("/{message_id}", response_model=MessageRead)
def get_message(message_id: uuid.UUID, service: Inbox) -> MessageRead:
    return MessageRead.model_validate(service.get(message_id))


@router.get("/{message_id}/thread", response_model=list[MessageRead])
def get_thread(message_id: uuid.UUID, service: Inbox) -> list[MessageRead]:
    return [MessageRead.model_validate(m) for m in service.thread(message_id)]


@router.post("/{message_id}/reply", status_code=201, response_model=MessageRead)
def reply(message_id: uuid.UUID, data: ReplyCreate, service: Inbox) -> MessageRead:
    return MessageRead.model_validate(service.reply(message_id, data))


@router.patch("/{message_id}/read", response_model=MessageRead)
def mark_read(message_id: uuid.UUID, service: Inbox, reader: str | None = None) -> MessageRead:
    return MessageRead.model_validate(service.mark_read(message_id, reader))


@router.post("/{message_id}/ack", response_model=ReceiptRead)
def acknowledge(message_id: uuid.UUID, service: Inbox, agent: str) -> ReceiptRead:
    return ReceiptRead.model_validate(service.acknowledge(message_id, agent))


@router.patch("/{message_id}/archive", response_model=MessageRead)
def archive(message_id: uuid.UUID, service: Inbox) -> MessageRead:
    return MessageRead.model_validate(service.archive(message_id))
