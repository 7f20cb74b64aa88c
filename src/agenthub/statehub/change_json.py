"""Cursor-page changes encoded as JSON by the database.

A page of 5000 changes built one Python dict per row (and per state) and then
encoded was most of a feed page's cost. Here each change arrives from the
database as its final JSON text (`json_object` on SQLite, `json_build_object`
on PostgreSQL), in the shape and key order `rows` gives it, and a page is those
texts joined.

SQLite keeps ids and timestamps as text; the SQL reshapes the forms State Hub
writes (32 hex digits; "YYYY-MM-DD HH:MM:SS.ffffff", naive UTC). Each row also
says whether every such value is in those forms; a page holding one that is not
(a database written by other tools) is shaped in Python instead, by `rows`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from operator import itemgetter
from typing import Any

from sqlalchemy import (
    Select,
    String,
    Text,
    Uuid,
    and_,
    bindparam,
    cast,
    func,
    literal_column,
    or_,
    select,
    true,
    type_coerce,
)
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
    return literal_column("'" + word.replace("'", "''") + "'")


def _wire_value(column: Any, postgres: bool) -> tuple[Any, Any]:
    """The column as contract text, and the condition under which that text is right."""
    if isinstance(column.type, Uuid):
        if postgres:
            return cast(column, String), true()
        hexed = type_coerce(column, String)
        text = (
            func.substr(hexed, 1, 8) + "-" + func.substr(hexed, 9, 4) + "-"
            + func.substr(hexed, 13, 4) + "-" + func.substr(hexed, 17, 4) + "-"
            + func.substr(hexed, 21)
        )  # fmt: skip
        return text, or_(hexed.is_(None), func.length(hexed) == 32)
    if isinstance(column.type, UTCDateTime):
        if postgres:
            return func.to_char(func.timezone("UTC", column), PG_ISO_FORMAT), true()
        stored = type_coerce(column, String)
        text = func.substr(stored, 1, 10) + "T" + func.substr(stored, 12) + "Z"
        well_formed = and_(func.length(stored) == 26, func.substr(stored, 11, 1) == " ")
        return text, or_(stored.is_(None), well_formed)
    return column, true()


@cache
def change_statement(shape: ChangeShape, postgres: bool) -> Select[Any]:
    """(revision, well-formed, change JSON) for the shape's rows in (:after, :cut],
    in key order within a revision."""
    build = func.json_build_object if postgres else func.json_object
    values: dict[str, Any] = {}
    checks: list[Any] = []
    for column in shape.columns:
        values[column.name], check = _wire_value(column, postgres)
        checks.append(check)
    state = build(*(arg for name, value in values.items() for arg in (_quoted(name), value)))
    key = values[shape.key[0]]
    for name in shape.key[1:]:
        key = key + ":" + values[name]
    change = build(
        _quoted("revision"), shape.table.revision,
        _quoted("entity"), _quoted(shape.entity),
        _quoted("key"), key,
        _quoted("op"), _quoted(shape.op),
        _quoted("state"), state,
    )  # fmt: skip
    revision = shape.table.revision
    return (
        select(revision, and_(*checks) if not postgres else true(), cast(change, Text))
        .where(revision > bindparam("after"), revision <= bindparam("cut"))
        .order_by(revision, *shape.order)
    )


def encoded_changes(session: Session, after: int, cut: int) -> list[bytes] | None:
    """The changes in (after, cut] as JSON texts in contract order, or None when a
    row holds a value the SQL does not reshape (the caller shapes it in Python)."""
    postgres = session.get_bind().dialect.name == "postgresql"
    rows: list[tuple[int, str]] = []
    for shape in SHAPES:
        result = session.execute(change_statement(shape, postgres), {"after": after, "cut": cut})
        for row in result:
            revision, well_formed, change = row[0], row[1], row[2]
            if not well_formed:
                return None
            rows.append((int(revision), str(change)))
    rows.sort(key=itemgetter(0))  # stable: keeps the shapes' order within a revision
    return [change.encode() for _, change in rows]


def shaped_changes(session: Session, after: int, cut: int) -> list[dict[str, Any]]:
    """The changes in (after, cut] as dicts, shaped in Python (`rows`)."""
    changes: list[dict[str, Any]] = []
    for shape in SHAPES:
        stmt = (
            select(*wire_columns(session, shape.columns))
            .where(shape.table.revision > after, shape.table.revision <= cut)
            .order_by(shape.table.revision, *shape.order)
        )
        for row in session.execute(stmt):
            state = shape.state(row)
            changes.append(
                {
                    "revision": state["revision"],
                    "entity": shape.entity,
                    "key": ":".join(state[name] for name in shape.key),
                    "op": shape.op,
                    "state": state,
                }
            )
    changes.sort(key=itemgetter("revision"))  # stable, as above
    return changes
