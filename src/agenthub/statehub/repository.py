"""SQL for the inbox. Services call these inside their transaction; nothing here commits."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    CompoundSelect,
    Connection,
    Integer,
    Row,
    Select,
    and_,
    bindparam,
    exists,
    false,
    func,
    literal,
    not_,
    or_,
    select,
    union_all,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from agenthub.statehub.models import AgentMessage, MessageIdentityAlias, MessageReceipt
from agenthub.statehub.slugs import BROADCAST

RECEIPT_FIELDS = ("delivered_at", "read_at", "acknowledged_at")


def get_message(session: Session, message_id: uuid.UUID) -> AgentMessage | None:
    return session.get(AgentMessage, message_id)


_MESSAGES = AgentMessage.metadata.tables[AgentMessage.__tablename__]
_MESSAGE_COLUMNS = tuple(c.name for c in _MESSAGES.c if c.name != "revision")
_INSERT_MESSAGE = _MESSAGES.insert()


def insert_message(session: Session, message: AgentMessage) -> None:
    """INSERT a new message as one Core statement; `message` stays out of the session.

    The ORM's unit of work for one new row (the flush plan, and RETURNING the
    revision default nobody reads) was a third of a send's Python time."""
    session.execute(_INSERT_MESSAGE, {name: getattr(message, name) for name in _MESSAGE_COLUMNS})


def get_message_for_update(session: Session, message_id: uuid.UUID) -> AgentMessage | None:
    stmt = select(AgentMessage).where(AgentMessage.id == message_id)
    if session.get_bind().dialect.name == "postgresql":
        # FOR NO KEY UPDATE, not FOR UPDATE: it still serializes writers of this row,
        # but lets receipts' foreign-key checks (FOR KEY SHARE) through; FOR UPDATE
        # deadlocked a read mark against a concurrent ack or delivery stamp.
        stmt = stmt.with_for_update(key_share=True)
    return session.scalars(stmt).one_or_none()


def identity(session: Session | Connection, agent: str) -> tuple[str, list[str]]:
    """`agent`'s canonical slug and every stored spelling of it (the canonical slug
    and all its aliases), in one query."""
    canonical = agent
    values = {agent}
    for is_canonical, value in session.execute(_identity_statement(), {"agent": agent}):
        values.add(value)
        if is_canonical:
            canonical = value
    values.add(canonical)
    return canonical, sorted(values)


@functools.cache
def _identity_statement() -> CompoundSelect[bool, str]:
    """Built once, `agent` bound per call: building the union per request was a
    sixth of an unread read."""
    aliases = MessageIdentityAlias
    agent = bindparam("agent", type_=aliases.alias.type)
    canonical_of = select(aliases.canonical).where(aliases.alias == agent)
    return union_all(
        select(literal(True), aliases.canonical).where(aliases.alias == agent),
        select(literal(False), aliases.alias).where(
            aliases.canonical == func.coalesce(canonical_of.scalar_subquery(), agent)
        ),
    )


def identity_values(session: Session | Connection, agent: str) -> list[str]:
    """Every stored spelling of `agent`: its canonical slug and all aliases of it."""
    return identity(session, agent)[1]


def canonical_agent(session: Session, agent: str) -> str:
    canonical = session.scalar(
        select(MessageIdentityAlias.canonical).where(MessageIdentityAlias.alias == agent)
    )
    return canonical or agent


def not_expired(now: datetime | BindParameter[Any]) -> ColumnElement[bool]:
    return or_(AgentMessage.expires_at.is_(None), AgentMessage.expires_at > now)


def list_messages(
    session: Session | Connection,
    *,
    now: datetime,
    to_values: Sequence[str] | None,
    from_values: Sequence[str] | None,
    unread_only: bool,
    kind: str | None,
    include_archived: bool,
    limit: int,
    delivered_to: str | None = None,
) -> list[Row[Any]]:
    """One page, newest first, as rows of `agent_messages` columns, in one statement.

    With `delivered_to` (a canonical slug) each row also carries `delivered`:
    whether that agent has a delivery stamp on it.
    """
    stmt = _page_statement(
        inbox=to_values is not None,
        by_sender=from_values is not None,
        by_kind=kind is not None,
        include_archived=include_archived,
        unread_only=unread_only,
        stamped=delivered_to is not None,
    )
    params: dict[str, Any] = {"now": now, "limit": limit}
    for name, value in (
        ("to_values", to_values),
        ("from_values", from_values),
        ("kind", kind),
        ("delivered_to", delivered_to),
    ):
        if value is not None:
            params[name] = list(value) if name.endswith("values") else value
    return list(session.execute(stmt, params).all())


@functools.lru_cache(maxsize=128)
def _page_statement(
    *,
    inbox: bool,
    by_sender: bool,
    by_kind: bool,
    include_archived: bool,
    unread_only: bool,
    stamped: bool,
) -> Select[Any]:
    """The page statement for one combination of filters, built once: values are
    bound parameters (building the union's column proxies per request was a
    quarter of the unread read)."""
    to_values: BindParameter[Any] | None = bindparam("to_values", expanding=True) if inbox else None
    conditions: list[ColumnElement[bool]] = [not_expired(bindparam("now"))]
    if by_sender:
        conditions.append(AgentMessage.from_agent.in_(bindparam("from_values", expanding=True)))
    if by_kind:
        conditions.append(AgentMessage.kind == bindparam("kind"))
    if not include_archived:
        conditions.append(AgentMessage.archived_at.is_(None))
    if unread_only:
        conditions.append(_unread(to_values))
    columns: list[ColumnElement[Any]] = list(AgentMessage.__table__.c)
    if stamped:
        stamp = exists().where(
            MessageReceipt.message_id == AgentMessage.id,
            MessageReceipt.agent == bindparam("delivered_to"),
            MessageReceipt.delivered_at.is_not(None),
        )
        columns.append(stamp.label("delivered"))
    limit = bindparam("limit", type_=Integer)

    def page(*where: ColumnElement[bool]) -> Select[Any]:
        newest_first = (AgentMessage.created_at.desc(), AgentMessage.id.desc())
        return select(*columns).where(*conditions, *where).order_by(*newest_first).limit(limit)

    if to_values is None:
        return page()
    # An inbox is the reader's direct messages plus every broadcast. Two scans
    # that each walk the (to_agent, created_at) index and stop at `limit`, merged
    # in the same statement, instead of one OR that reads and sorts every
    # broadcast ever sent.
    direct = page(AgentMessage.to_agent.in_(to_values)).subquery()
    broadcasts = page(AgentMessage.to_agent == BROADCAST).subquery()
    both = union_all(select(direct), select(broadcasts)).subquery()
    return select(both).order_by(both.c.created_at.desc(), both.c.id.desc()).limit(limit)


def _unread(reader_values: BindParameter[Any] | None) -> ColumnElement[bool]:
    direct_unread = and_(AgentMessage.to_agent != BROADCAST, AgentMessage.read_at.is_(None))
    if reader_values is None:
        broadcast_unread: ColumnElement[bool] = and_(
            AgentMessage.to_agent == BROADCAST, AgentMessage.read_at.is_(None)
        )
    else:
        has_read_receipt = exists().where(
            MessageReceipt.message_id == AgentMessage.id,
            MessageReceipt.agent.in_(reader_values),
            MessageReceipt.read_at.is_not(None),
        )
        broadcast_unread = and_(AgentMessage.to_agent == BROADCAST, not_(has_read_receipt))
    return or_(direct_unread, broadcast_unread)


def thread_messages(session: Session, root_id: uuid.UUID) -> list[AgentMessage]:
    stmt = (
        select(AgentMessage)
        .where(or_(AgentMessage.id == root_id, AgentMessage.thread_id == root_id))
        .order_by(AgentMessage.created_at.asc(), AgentMessage.id.asc())
    )
    return list(session.scalars(stmt).all())


def upsert_receipts(
    session: Session,
    message_ids: Sequence[uuid.UUID],
    agent: str,
    *,
    delivered_at: datetime | None = None,
    read_at: datetime | None = None,
    acknowledged_at: datetime | None = None,
) -> None:
    """Insert or first-write-wins update of `agent`'s receipts, one statement.

    `ON CONFLICT DO UPDATE … COALESCE(existing, new)` keeps the first value of
    every field even when two readers race; the `WHERE` skips the update (and so
    any revision bump or dead tuple) when no field would change.
    """
    if not message_ids:
        return
    values = {"delivered_at": delivered_at, "read_at": read_at, "acknowledged_at": acknowledged_at}
    rows = [{"message_id": mid, "agent": agent, **values} for mid in message_ids]
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stmt = insert(MessageReceipt).values(rows)
    table = MessageReceipt.__table__.c
    changes = [
        and_(table[name].is_(None), stmt.excluded[name].is_not(None))
        for name in RECEIPT_FIELDS
        if values[name] is not None
    ]
    stmt = stmt.on_conflict_do_update(
        index_elements=[MessageReceipt.message_id, MessageReceipt.agent],
        set_={
            name: func.coalesce(table[name], stmt.excluded[name])
            for name in RECEIPT_FIELDS
            if values[name] is not None
        },
        where=or_(*changes) if changes else false(),
    )
    session.execute(stmt)


def get_receipt(session: Session, message_id: uuid.UUID, agent: str) -> MessageReceipt | None:
    session.expire_all()
    return session.get(MessageReceipt, (message_id, agent))
