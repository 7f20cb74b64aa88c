"""The inbox service: every rule of sending, replying, reading, acking and archiving.

Each public method is one transaction. Rules live here; SQL lives in
`repository`; HTTP lives in `api`.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Row
from sqlalchemy.orm import Session

from agenthub.clock import Clock
from agenthub.statehub import repository as repo
from agenthub.statehub.errors import InvalidRequest, NotFound
from agenthub.statehub.models import AgentMessage, MessageReceipt
from agenthub.statehub.schemas import KIND_PATTERN, MessageCreate, ReplyCreate
from agenthub.statehub.slugs import BROADCAST, SLUG_HINT, is_slug
from agenthub.statehub.store import Database

# A listed message: the columns of `agent_messages` as a row (attribute access,
# like the model), read without building ORM objects.
MessageRow = Row[Any]

NEWS_KIND = "news"
MAX_LIST_LIMIT = 1000


@dataclass(frozen=True)
class ListQuery:
    to_agent: str | None = None
    from_agent: str | None = None
    unread_only: bool = False
    kind: str | None = None
    include_archived: bool = False
    limit: int = 50
    # Look without consuming: an unread read that stamps no `delivered_at`, so a
    # poller can check the inbox and leave the messages unread for the reader.
    peek: bool = False


class InboxService:
    def __init__(self, db: Database, clock: Clock, *, news_ttl_days: int = 30) -> None:
        self.db = db
        self.clock = clock
        self.news_ttl = timedelta(days=news_ttl_days)

    # -- writes ---------------------------------------------------------------

    def send(self, data: MessageCreate) -> AgentMessage:
        now = self.clock.now()
        # A message that names no other message is one INSERT and needs no
        # transaction around it (see `Database.statement`).
        alone = data.thread_id is None and data.supersedes_id is None
        with self.db.statement() if alone else self.db.write() as session:
            thread_root = self._thread_root(session, data.thread_id)
            predecessor = None
            if data.supersedes_id is not None:
                predecessor = repo.get_message_for_update(session, data.supersedes_id)
                if predecessor is None:
                    raise InvalidRequest(
                        f"supersedes_id {data.supersedes_id} names no message",
                        hint="pass the id of the message this one replaces, or omit supersedes_id",
                    )
            expires_at = data.expires_at
            if expires_at is None and data.kind == NEWS_KIND:
                expires_at = now + self.news_ttl
            message = AgentMessage(
                id=uuid.uuid4(),
                from_agent=data.from_agent,
                to_agent=data.to_agent,
                subject=data.subject,
                body=data.body,
                thread_id=thread_root,
                kind=data.kind,
                expires_at=expires_at,
                supersedes_id=data.supersedes_id,
                created_at=now,
            )
            repo.insert_message(session, message)
            # A broadcast replaces its predecessor in the same transaction, so a
            # reader never sees both live (and the feed shows one revision).
            if (
                predecessor is not None
                and data.to_agent == BROADCAST
                and predecessor.archived_at is None
            ):
                predecessor.archived_at = now
            self.db.made(session, message)
            return message

    def reply(self, message_id: uuid.UUID, data: ReplyCreate) -> AgentMessage:
        now = self.clock.now()
        with self.db.write() as session:
            original = self._require_for_update(session, message_id)
            subject = data.subject if data.subject is not None else _reply_subject(original.subject)
            reply = AgentMessage(
                id=uuid.uuid4(),
                from_agent=data.from_agent,
                to_agent=original.from_agent,
                subject=subject,
                body=data.body,
                thread_id=original.thread_id or original.id,
                kind="message",
                created_at=now,
            )
            session.add(reply)
            if original.to_agent == BROADCAST:
                reader = repo.canonical_agent(session, data.from_agent)
                repo.upsert_receipts(session, [original.id], reader, delivered_at=now, read_at=now)
            elif original.read_at is None:
                original.read_at = now
            self.db.made(session, reply)
            return reply

    def mark_read(self, message_id: uuid.UUID, reader: str | None) -> AgentMessage:
        now = self.clock.now()
        if reader is not None:
            _require_slug(reader, "reader")
        with self.db.write() as session:
            message = self._require_for_update(session, message_id)
            if message.to_agent == BROADCAST and reader is not None:
                canonical = repo.canonical_agent(session, reader)
                repo.upsert_receipts(
                    session, [message.id], canonical, delivered_at=now, read_at=now
                )
            elif message.read_at is None:
                message.read_at = now
            return message

    def acknowledge(self, message_id: uuid.UUID, agent: str) -> MessageReceipt:
        now = self.clock.now()
        _require_slug(agent, "agent")
        with self.db.write() as session:
            message = self._require(session, message_id)
            canonical = repo.canonical_agent(session, agent)
            repo.upsert_receipts(
                session,
                [message.id],
                canonical,
                delivered_at=now,
                read_at=now,
                acknowledged_at=now,
            )
            receipt = repo.get_receipt(session, message.id, canonical)
            assert receipt is not None
            self.db.made(session, receipt)
            return receipt

    def archive(self, message_id: uuid.UUID) -> AgentMessage:
        now = self.clock.now()
        with self.db.write() as session:
            message = self._require_for_update(session, message_id)
            # First write wins: re-archiving changes nothing (and makes no revision).
            if message.archived_at is None:
                message.archived_at = now
                if message.to_agent != BROADCAST and message.read_at is None:
                    message.read_at = now
            return message

    # -- reads ----------------------------------------------------------------

    def list_messages(self, query: ListQuery) -> list[MessageRow]:
        if query.to_agent is None and query.from_agent is None:
            raise InvalidRequest(
                "to_agent is required unless from_agent is given",
                hint=(
                    "list an inbox with ?to_agent=<slug>, "
                    "or a sender's messages with ?from_agent=<slug>"
                ),
            )
        if query.to_agent is not None:
            _require_slug(query.to_agent, "to_agent")
        if query.from_agent is not None:
            _require_slug(query.from_agent, "from_agent")
        if query.kind is not None and not re.fullmatch(KIND_PATTERN, query.kind):
            raise InvalidRequest(
                f"invalid kind {query.kind!r}",
                hint="kinds are 1-32 lowercase letters, digits, '.', '_' or '-' (e.g. news)",
            )
        if not 1 <= query.limit <= MAX_LIST_LIMIT:
            raise InvalidRequest(
                f"limit {query.limit} is out of range", hint=f"use 1..{MAX_LIST_LIMIT}"
            )
        now = self.clock.now()
        # Only a stamping read (unread_only with a reader, not a peek) writes, and
        # only when a broadcast it returns has no delivery stamp yet: a repeated read
        # (the common case) is answered from a read transaction, without the write lock.
        stamping = query.unread_only and query.to_agent is not None and not query.peek
        with self.db.read_rows() as conn:
            messages, canonical = self._list(conn, query, now, stamping=stamping)
            if not stamping or not _undelivered(messages):
                return messages
        with self.db.write() as session:
            messages, canonical = self._list(session, query, now)
            broadcasts = [m.id for m in messages if m.to_agent == BROADCAST]
            repo.upsert_receipts(session, broadcasts, canonical, delivered_at=now)
            return messages

    @staticmethod
    def _list(
        session: Session | Connection, query: ListQuery, now: datetime, *, stamping: bool = False
    ) -> tuple[list[MessageRow], str]:
        """The page, and the reader's canonical slug (`""` without a reader); with
        `stamping`, each row carries whether the reader's delivery stamp exists."""
        canonical, to_values = "", None
        if query.to_agent is not None:
            canonical, to_values = repo.identity(session, query.to_agent)
        from_values = (
            repo.identity_values(session, query.from_agent)
            if query.from_agent is not None
            else None
        )
        messages = repo.list_messages(
            session,
            now=now,
            to_values=to_values,
            from_values=from_values,
            unread_only=query.unread_only,
            kind=query.kind,
            include_archived=query.include_archived,
            limit=query.limit,
            delivered_to=canonical if stamping else None,
        )
        return messages, canonical

    def get(self, message_id: uuid.UUID) -> AgentMessage:
        with self.db.read() as session:
            return self._require(session, message_id)

    def thread(self, message_id: uuid.UUID) -> list[AgentMessage]:
        with self.db.read() as session:
            message = self._require(session, message_id)
            return repo.thread_messages(session, message.thread_id or message.id)

    # -- helpers --------------------------------------------------------------

    def _thread_root(self, session: Session, thread_id: uuid.UUID | None) -> uuid.UUID | None:
        if thread_id is None:
            return None
        root = repo.get_message(session, thread_id)
        if root is None:
            raise InvalidRequest(
                f"thread_id {thread_id} names no message",
                hint="thread_id must be the id of an existing message (the thread's root)",
            )
        # Naming a reply is accepted and means its thread: thread_id always holds a root.
        return root.thread_id or root.id

    def _require(self, session: Session, message_id: uuid.UUID) -> AgentMessage:
        message = repo.get_message(session, message_id)
        if message is None:
            raise NotFound(
                f"message {message_id} not found", hint="check the id; no message has it"
            )
        return message

    def _require_for_update(self, session: Session, message_id: uuid.UUID) -> AgentMessage:
        message = repo.get_message_for_update(session, message_id)
        if message is None:
            raise NotFound(
                f"message {message_id} not found", hint="check the id; no message has it"
            )
        return message


def _undelivered(messages: list[MessageRow]) -> bool:
    """Whether a broadcast in the page lacks the reader's delivery stamp."""
    return any(m.to_agent == BROADCAST and not m.delivered for m in messages)


def _reply_subject(subject: str) -> str:
    return subject if subject.lower().startswith("re:") else f"Re: {subject}"[:500]


def _require_slug(value: str, field: str) -> None:
    if not is_slug(value):
        raise InvalidRequest(f"invalid {field} {value!r}", hint=SLUG_HINT)
