"""The instance label: who this State Hub is, stable across restarts and redeploys."""

from __future__ import annotations

import secrets

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from agenthub.statehub.models import StateHubMeta
from agenthub.statehub.store import Database

INSTANCE_KEY = "instance_label"
# The label the running State Hub answers with (STATEHUB_INSTANCE_LABEL, else the stored
# one), rewritten at every start so `hubcore capture --source-db` reads what is in force.
IN_FORCE_KEY = "instance_label_in_force"


def stored_instance_label(db: Database) -> str:
    """Return the label kept in the database, generating it on first use.

    An insert-if-absent makes two workers starting at once agree on one label.
    """
    with db.write() as session:
        _insert_if_absent(session, INSTANCE_KEY, f"statehub-{secrets.token_hex(8)}")
        row = session.get(StateHubMeta, INSTANCE_KEY)
        assert row is not None
        return row.value


def instance_label_in_force(db: Database, configured: str | None) -> str:
    """The label this start runs with (`configured`, else the stored one), recorded under
    `IN_FORCE_KEY` where a reader of the database finds it."""
    label = configured or stored_instance_label(db)
    with db.write() as session:
        row = session.get(StateHubMeta, IN_FORCE_KEY)
        if row is None:
            _insert_if_absent(session, IN_FORCE_KEY, label)
        elif row.value != label:
            row.value = label
    return label


def _insert_if_absent(session: Session, key: str, value: str) -> None:
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    session.execute(insert(StateHubMeta).values(key=key, value=value).on_conflict_do_nothing())
