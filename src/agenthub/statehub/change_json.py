"""Cursor-page changes as their JSON text.

A page of 5000 changes is mostly the encoding of its rows. On PostgreSQL the
database writes it: a whole page is one text value, every change spelled out by
`concat` in the shape and key order `rows` gives it (`json_build_object` per
row cost twice as much) and joined in contract order by `string_agg`, so a page
is one row to fetch. On SQLite the rows are read as the driver's tuples, shaped
by `rows` (which slices SQLite's stored text for ids and timestamps, and parses
any other stored form) and encoded once by orjson: SQLite's `json_object` with
the SQL to reshape ids and timestamps cost more than that.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from operator import itemgetter
from typing import Any

import orjson
from sqlalchemy import (
    BigInteger,
    Integer,
    Select,
    String,
    Text,
    Uuid,
    bindparam,
    cast,
    func,
    literal,
    literal_column,
    null,
    select,
    union_all,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.orm import Session

from agenthub.sqltypes import UTCDateTime
from agenthub.statehub.rows import (
    MESSAGE_COLUMNS,
    MESSAGES,
    PG_ISO_FORMAT,
    RECEIPT_COLUMNS,
    RECEIPT_TOMBSTONE_COLUMNS,
    RECEIPT_TOMBSTONES,
    RECEIPTS,
    TOMBSTONE_COLUMNS,
    TOMBSTONES,
    message_state,
    receipt_state,
    receipt_tombstone_state,
    tombstone_state,
    wire_columns,
)


@dataclass(frozen=True, eq=False)  # hashed by identity: the shapes are constants
class ChangeShape:
    """One table's rows as feed changes."""

    table: Any
    columns: tuple[Any, ...]
    entity: str
    op: str
    key: tuple[str, ...]  # the fields whose values, joined by ':', are the change's key
    state: Callable[[Any], dict[str, Any]]

    @property
    def order(self) -> tuple[Any, ...]:
        return tuple(self.table[name] for name in self.key)


# Within a revision the contract serves messages, receipts, receipt deletes and
# tombstones, in this order, each in key order.
SHAPES = (
    ChangeShape(MESSAGES, MESSAGE_COLUMNS, "message", "upsert", ("id",), message_state),
    ChangeShape(
        RECEIPTS, RECEIPT_COLUMNS, "receipt", "upsert", ("message_id", "agent"), receipt_state
    ),
    ChangeShape(
        RECEIPT_TOMBSTONES,
        RECEIPT_TOMBSTONE_COLUMNS,
        "receipt",
        "delete",
        ("message_id", "agent"),
        receipt_tombstone_state,
    ),
    ChangeShape(
        TOMBSTONES, TOMBSTONE_COLUMNS, "tombstone", "delete", ("message_id",), tombstone_state
    ),
)


def _quoted(word: str) -> Any:
    """A constant of ours inlined as an SQL string literal (keys, entity, op)."""
    return literal_column("'" + word.replace("'", "''") + "'", type_=Text)


def _pg_json(column: Any) -> Any:
    """PostgreSQL: the column's value as JSON text (`null` for NULL)."""
    quote = _quoted('"')
    if isinstance(column.type, Uuid):
        text = quote + cast(column, Text) + quote
    elif isinstance(column.type, UTCDateTime):
        text = quote + func.to_char(func.timezone("UTC", column), PG_ISO_FORMAT) + quote
    elif isinstance(column.type, Integer | BigInteger):
        text = cast(column, Text)
    elif isinstance(column.type, String):  # Text is a String
        text = cast(func.to_json(column), Text)
    else:
        raise TypeError(f"no JSON spelling for {column} ({column.type!r})")
    return func.coalesce(text, "null") if column.nullable else text


def _spelled(shape: ChangeShape) -> Any:
    """PostgreSQL: one change of the shape as its JSON text, in `rows`' key order.
    One `concat` of all the parts: each `||` would copy the text built so far."""

    def name(word: str) -> str:
        return orjson.dumps(word).decode()

    keys = [shape.table[field] for field in shape.key]
    if len(keys) == 1:
        key = _pg_json(keys[0])
    else:
        joined = cast(keys[0], Text)
        for column in keys[1:]:
            joined = joined + _quoted(":") + cast(column, Text)
        key = cast(func.to_json(joined), Text)
    parts = [
        _quoted('{"revision":'), cast(shape.table.revision, Text),
        _quoted(f',"entity":{name(shape.entity)},"key":'), key,
        _quoted(f',"op":{name(shape.op)},"state":{{'),
    ]  # fmt: skip
    for i, column in enumerate(shape.columns):
        parts += [_quoted(("," if i else "") + name(column.name) + ":"), _pg_json(column)]
    parts.append(_quoted("}}"))
    return func.concat(*parts)


@cache
def page_statement() -> Select[int, str]:
    """PostgreSQL: (how many changes, their JSON texts joined by ',') for
    (:after, :cut], in contract order: by revision, then shape, then key."""
    arms = []
    for order, shape in enumerate(SHAPES):
        keys = [shape.table[name] for name in shape.key]
        second = cast(keys[1], Text) if len(keys) > 1 else cast(null(), Text)
        arms.append(
            select(
                shape.table.revision.label("revision"),
                literal(order).label("shape"),
                keys[0].label("k1"),
                second.label("k2"),
                _spelled(shape).label("change"),
            ).where(
                shape.table.revision > bindparam("after"), shape.table.revision <= bindparam("cut")
            )
        )
    changes = union_all(*arms).subquery("changes")
    c = changes.c
    ordered = aggregate_order_by(literal(","), c.revision, c.shape, c.k1, c.k2)
    return select(func.count(), func.coalesce(func.string_agg(c.change, ordered), ""))


def encoded_changes(session: Session, after: int, cut: int) -> tuple[int, bytes]:
    """(how many, the changes in (after, cut] as JSON texts joined by ','), in
    contract order."""
    if session.get_bind().dialect.name == "postgresql":
        row = session.execute(page_statement(), {"after": after, "cut": cut}).one()
        return int(row[0]), str(row[1]).encode()
    changes = shaped_changes(session, after, cut)
    return len(changes), orjson.dumps(changes)[1:-1]


def shaped_changes(session: Session, after: int, cut: int) -> list[dict[str, Any]]:
    """The changes in (after, cut] as dicts, shaped in Python (`rows`)."""
    changes: list[dict[str, Any]] = []
    for shape in SHAPES:
        stmt = (
            select(*wire_columns(session, shape.columns))
            .where(shape.table.revision > after, shape.table.revision <= cut)
            .order_by(shape.table.revision, *shape.order)
        )
        entity, op, state_of = shape.entity, shape.op, shape.state
        key = itemgetter(*shape.key)
        for row in session.execute(stmt):
            state = state_of(row)
            changes.append(
                {
                    "revision": state["revision"],
                    "entity": entity,
                    "key": key(state) if len(shape.key) == 1 else ":".join(key(state)),
                    "op": op,
                    "state": state,
                }
            )
    changes.sort(key=itemgetter("revision"))  # stable: keeps the shapes' order within a revision
    return changes
