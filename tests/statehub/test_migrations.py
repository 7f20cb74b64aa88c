"""Alembic: empty → head, head → base, the server migrating on start, and the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from fastapi.testclient import TestClient
from sqlalchemy import Connection, Engine, inspect, text
from typer.testing import CliRunner

from agenthub.cli import app as cli_app
from agenthub.db import make_engine
from agenthub.statehub import migrate
from agenthub.statehub.app import create_app
from agenthub.statehub.models import Base
from agenthub.statehub.settings import StateHubSettings

SRC = Path(__file__).resolve().parents[2] / "src"
INBOX_TABLES = {"agent_messages", "message_receipts", "message_identity_aliases", "statehub_meta"}


@pytest.fixture
def empty_engine(empty_database_url: str) -> Iterator[Engine]:
    engine = make_engine(empty_database_url)
    yield engine
    engine.dispose()


def tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names()) - {"alembic_version"}


def older_revisions() -> list[str]:
    """Every revision a deployed database may still be at: base and all but the head."""
    script = ScriptDirectory.from_config(migrate.alembic_config())
    return [
        "base",
        *[r.revision for r in script.walk_revisions() if r.revision != script.get_current_head()],
    ]


def test_upgrade_from_empty_reaches_head_with_the_inbox_tables(empty_engine: Engine) -> None:
    migrate.upgrade(empty_engine)

    assert migrate.current_revision(empty_engine) == migrate.head_revision()
    assert tables(empty_engine) >= INBOX_TABLES


def test_migrated_schema_matches_the_models(empty_engine: Engine) -> None:
    migrate.upgrade(empty_engine)

    with empty_engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"include_object": migrate.include_object})
        diff = compare_metadata(context, Base.metadata)

    assert diff == []


def test_downgrade_to_base_removes_every_table(empty_engine: Engine) -> None:
    migrate.upgrade(empty_engine)

    migrate.downgrade(empty_engine, "base")

    assert migrate.current_revision(empty_engine) is None
    assert tables(empty_engine) == set()


def test_upgrade_after_downgrade_rebuilds_the_schema(empty_engine: Engine) -> None:
    migrate.upgrade(empty_engine)
    migrate.downgrade(empty_engine, "base")

    migrate.upgrade(empty_engine)

    assert migrate.current_revision(empty_engine) == migrate.head_revision()
    assert tables(empty_engine) >= INBOX_TABLES


def test_upgrade_at_head_is_a_no_op(empty_engine: Engine) -> None:
    migrate.upgrade(empty_engine)

    migrate.upgrade(empty_engine)

    assert migrate.current_revision(empty_engine) == migrate.head_revision()


@pytest.mark.parametrize("start_at", older_revisions())
def test_server_start_brings_an_empty_or_older_database_to_head(
    empty_database_url: str, empty_engine: Engine, start_at: str
) -> None:
    if start_at != "base":
        migrate.upgrade(empty_engine, start_at)
    settings = StateHubSettings(database_url=empty_database_url, instance_label="mig")

    with TestClient(create_app(settings)) as client:
        sent = client.post(
            "/messages/", json={"from_agent": "a", "to_agent": "b", "subject": "s", "body": "b"}
        )

    assert sent.status_code == 201
    assert migrate.current_revision(empty_engine) == migrate.head_revision()


def test_cli_migrate_brings_a_fresh_sqlite_file_to_head(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "statehub.db"

    result = CliRunner().invoke(
        cli_app, ["statehub", "migrate"], env={"STATEHUB_DATABASE_URL": f"sqlite:///{path}"}
    )

    assert result.exit_code == 0, result.output
    assert f"database at revision {migrate.head_revision()}" in result.output
    engine = make_engine(f"sqlite:///{path}")
    try:
        assert migrate.current_revision(engine) == migrate.head_revision()
        assert tables(engine) >= INBOX_TABLES
    finally:
        engine.dispose()


def test_cli_migrate_downgrade_to_base_empties_the_schema(tmp_path: Path) -> None:
    env = {"STATEHUB_DATABASE_URL": f"sqlite:///{tmp_path / 'statehub.db'}"}
    runner = CliRunner()
    assert runner.invoke(cli_app, ["statehub", "migrate"], env=env).exit_code == 0

    result = runner.invoke(cli_app, ["statehub", "migrate", "--downgrade-to", "base"], env=env)

    assert result.exit_code == 0, result.output
    assert "database at revision base" in result.output


def test_servers_starting_at_once_on_an_empty_database_both_reach_head(
    empty_database_url: str,
) -> None:
    # Three workers (or replicas) of a fresh deployment migrate on start together. They are
    # separate processes, as in production (Alembic itself is not thread-safe).
    env = {**os.environ, "STATEHUB_DATABASE_URL": empty_database_url}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "agenthub.cli", "statehub", "migrate"]

    workers = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for _ in range(3)
    ]
    outputs = [worker.communicate(timeout=120)[0].decode() for worker in workers]

    assert [worker.returncode for worker in workers] == [0, 0, 0], "\n".join(outputs)
    engine = make_engine(empty_database_url)
    try:
        assert migrate.current_revision(engine) == migrate.head_revision()
    finally:
        engine.dispose()


# -- data survives schema changes -------------------------------------------------


def revisions_with_a_predecessor() -> list[str]:
    script = ScriptDirectory.from_config(migrate.alembic_config())
    return [r.revision for r in script.walk_revisions() if r.down_revision is not None]


def older_revisions_with_tables() -> list[str]:
    return [r for r in older_revisions() if r != "base"]


def write_inbox(engine: Engine) -> None:
    """A root, a reply threaded to it, a successor superseding it, a receipt, an alias —
    written with the first revision's columns only, as an older State Hub would have."""

    def key(value: uuid.UUID) -> str:
        return value.hex if engine.dialect.name == "sqlite" else str(value)

    created = "2026-01-01 00:00:00.000000" if engine.dialect.name == "sqlite" else None
    insert = text(
        "insert into agent_messages (id, from_agent, to_agent, subject, body, thread_id,"
        " kind, supersedes_id, created_at)"
        " values (:id, 'alice', '*', 's', 'b', :thread, 'message', :sup, :created)"
    )
    with engine.begin() as conn:
        for message_id, thread, sup in (
            (ROOT, None, None),
            (REPLY, ROOT, None),
            (SUCCESSOR, None, ROOT),
        ):
            conn.execute(
                insert,
                {
                    "id": key(message_id),
                    "thread": thread and key(thread),
                    "sup": sup and key(sup),
                    "created": created or datetime(2026, 1, 1, tzinfo=UTC),
                },
            )
        conn.execute(
            text(
                "insert into message_receipts (message_id, agent, read_at) values (:m, 'bob', :t)"
            ),
            {"m": key(ROOT), "t": created or datetime(2026, 1, 1, tzinfo=UTC)},
        )
        conn.execute(
            text("insert into message_identity_aliases (alias, canonical) values ('b0', 'bob')")
        )


def inbox_facts(engine: Engine) -> dict[str, object]:
    with engine.connect() as conn:
        return {
            "messages": conn.execute(text("select count(*) from agent_messages")).scalar_one(),
            "threaded": conn.execute(
                text("select count(*) from agent_messages where thread_id is not null")
            ).scalar_one(),
            "superseding": conn.execute(
                text("select count(*) from agent_messages where supersedes_id is not null")
            ).scalar_one(),
            "receipts": conn.execute(
                text("select agent from message_receipts where read_at is not null")
            )
            .scalars()
            .all(),
            "aliases": conn.execute(
                text("select count(*) from message_identity_aliases")
            ).scalar_one(),
        }


EXPECTED_FACTS = {"messages": 3, "threaded": 1, "superseding": 1, "receipts": ["bob"], "aliases": 1}
ROOT, REPLY, SUCCESSOR = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()


@pytest.mark.parametrize("start_at", older_revisions_with_tables())
def test_inbox_written_at_an_older_revision_survives_the_upgrade_to_head(
    empty_engine: Engine, start_at: str
) -> None:
    migrate.upgrade(empty_engine, start_at)
    write_inbox(empty_engine)

    migrate.upgrade(empty_engine)

    assert inbox_facts(empty_engine) == EXPECTED_FACTS


@pytest.mark.parametrize("revision", revisions_with_a_predecessor())
def test_downgrading_one_revision_keeps_the_inbox(empty_engine: Engine, revision: str) -> None:
    # Going back to a schema that still has the inbox tables must not drop their rows
    # (on SQLite a table rebuild with foreign keys on would cascade-delete receipts).
    migrate.upgrade(empty_engine, revision)
    write_inbox(empty_engine)

    migrate.downgrade(empty_engine, "-1")

    assert inbox_facts(empty_engine) == EXPECTED_FACTS


FIRST_REVISION = "0001_inbox_tables"


def rebuild_agent_messages(conn: Connection) -> None:
    """What Alembic's SQLite batch mode does for most column changes: copy, DROP, rename."""
    with Operations(MigrationContext.configure(conn)).batch_alter_table(
        "agent_messages", recreate="always"
    ):
        pass


def test_a_table_rebuild_inside_a_migration_keeps_receipts_and_links(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'statehub.db'}")
    try:
        # At the first revision: later ones add triggers that a bare rebuild would trip.
        migrate.upgrade(engine, FIRST_REVISION)
        write_inbox(engine)

        with migrate.MIGRATIONS._migrating(engine) as conn:
            rebuild_agent_messages(conn)

        assert inbox_facts(engine) == EXPECTED_FACTS
    finally:
        engine.dispose()


def test_the_same_rebuild_with_foreign_keys_enforced_loses_them(tmp_path: Path) -> None:
    # The broken variant the migration connection exists to avoid.
    engine = make_engine(f"sqlite:///{tmp_path / 'statehub.db'}")
    try:
        # At the first revision: later ones add triggers that a bare rebuild would trip.
        migrate.upgrade(engine, FIRST_REVISION)
        write_inbox(engine)

        with engine.begin() as conn:
            rebuild_agent_messages(conn)

        facts = inbox_facts(engine)
        assert facts["receipts"] == []
        assert facts["threaded"] == facts["superseding"] == 0
    finally:
        engine.dispose()
