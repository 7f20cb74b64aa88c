"""Alembic: empty → head, head → base, the server migrating on start, and the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from fastapi.testclient import TestClient
from sqlalchemy import Engine, inspect
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


def declared_by_the_models(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    # Bookkeeping tables that only migrations create (no ORM model) are not drift.
    return not (type_ == "table" and reflected and compare_to is None)


def test_migrated_schema_matches_the_models(empty_engine: Engine) -> None:
    migrate.upgrade(empty_engine)

    with empty_engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"include_object": declared_by_the_models})
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
