"""The inbox tables as the design describes them, and their foreign keys on both databases."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine, inspect, text
from sqlalchemy.exc import IntegrityError

from agenthub.db import make_engine

DESIGN_COLUMNS = {
    "agent_messages": {
        "id",
        "from_agent",
        "to_agent",
        "subject",
        "body",
        "thread_id",
        "read_at",
        "archived_at",
        "kind",
        "expires_at",
        "supersedes_id",
        "created_at",
    },
    "message_receipts": {"message_id", "agent", "delivered_at", "read_at", "acknowledged_at"},
    "message_identity_aliases": {"alias", "canonical"},
}


@pytest.mark.parametrize("table", sorted(DESIGN_COLUMNS))
def test_table_has_the_design_columns(engine: Engine, table: str) -> None:
    columns = {c["name"] for c in inspect(engine).get_columns(table)}

    # The change feed adds `revision`; everything else the design names must be there.
    assert DESIGN_COLUMNS[table] <= columns


def test_receipts_are_keyed_by_message_and_agent(engine: Engine) -> None:
    pk = inspect(engine).get_pk_constraint("message_receipts")

    assert sorted(pk["constrained_columns"]) == ["agent", "message_id"]


def test_aliases_are_keyed_by_alias(engine: Engine) -> None:
    assert inspect(engine).get_pk_constraint("message_identity_aliases")["constrained_columns"] == [
        "alias"
    ]


def _id(engine: Engine, value: uuid.UUID) -> str:
    # SQLAlchemy's Uuid type stores 32 hex digits on SQLite and a native uuid on PostgreSQL.
    return value.hex if engine.dialect.name == "sqlite" else str(value)


def _insert_message(
    engine: Engine,
    conn: Connection,
    *,
    thread_id: uuid.UUID | None = None,
    supersedes_id: uuid.UUID | None = None,
) -> uuid.UUID:
    message_id = uuid.uuid4()
    conn.execute(
        text(
            "insert into agent_messages (id, from_agent, to_agent, subject, body, thread_id,"
            " kind, supersedes_id, created_at)"
            " values (:id, 'alice', '*', 's', 'b', :thread, 'message', :sup, :created)"
        ),
        {
            "id": _id(engine, message_id),
            "thread": thread_id and _id(engine, thread_id),
            "sup": supersedes_id and _id(engine, supersedes_id),
            "created": datetime(2026, 1, 1, tzinfo=UTC)
            if engine.dialect.name != "sqlite"
            else "2026-01-01 00:00:00.000000",
        },
    )
    return message_id


def test_deleting_a_message_drops_its_receipts_and_unlinks_other_rows(
    database_url: str,
) -> None:
    # A fresh engine: SQLite forgets foreign_keys per connection, so this also proves
    # every new connection turns enforcement back on.
    engine = make_engine(database_url)
    try:
        with engine.begin() as conn:
            root = _insert_message(engine, conn)
            reply = _insert_message(engine, conn, thread_id=root)
            successor = _insert_message(engine, conn, supersedes_id=root)
            conn.execute(
                text("insert into message_receipts (message_id, agent) values (:m, 'bob')"),
                {"m": _id(engine, root)},
            )

        with engine.begin() as conn:
            conn.execute(text("delete from agent_messages where id = :m"), {"m": _id(engine, root)})

        with engine.connect() as conn:
            assert conn.execute(text("select count(*) from message_receipts")).scalar_one() == 0
            rows = conn.execute(
                text("select id, thread_id, supersedes_id from agent_messages")
            ).all()
        assert {str(r.id).replace("-", "") for r in rows} == {reply.hex, successor.hex}
        assert all(r.thread_id is None and r.supersedes_id is None for r in rows)
    finally:
        engine.dispose()


def test_a_receipt_for_a_missing_message_is_refused(engine: Engine) -> None:
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(
            text("insert into message_receipts (message_id, agent) values (:m, 'bob')"),
            {"m": _id(engine, uuid.uuid4())},
        )


def test_sqlite_connections_enforce_foreign_keys(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'fk.db'}")
    try:
        for _ in range(2):
            with engine.connect() as conn:
                assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar_one() == 1
    finally:
        engine.dispose()
