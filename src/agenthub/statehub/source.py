"""Who this feed source is: its revision mode and its epoch.

The epoch changes whenever the history behind the revisions may have changed
under a consumer: on PostgreSQL it is derived from the cluster's system
identifier, its timeline (a failover or point-in-time restore starts a new
one) and the database's OID (a dump restored into a new database gets a new
one) — never from rows a restore would bring back — plus a generation that a
revision-mode switch bumps. A consumer holding another epoch gets 409 and
re-snapshots.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import literal_column, select, text
from sqlalchemy.orm import Session

from agenthub.statehub import revisions
from agenthub.statehub.models import StateHubMeta
from agenthub.statehub.revisions import RevisionMode
from agenthub.statehub.store import Database

MODE_KEY = "revision_mode"
OFFSET_KEY = "xid_offset"
GENERATION_KEY = "epoch_generation"
SQLITE_TOKEN_KEY = "sqlite_epoch_token"


@dataclass(frozen=True)
class SourceState:
    mode: RevisionMode
    xid_offset: int
    generation: int


def read_state(session: Session) -> SourceState:
    result = session.execute(
        text("SELECT key, value FROM statehub_meta WHERE key IN (:m, :o, :g)"),
        {"m": MODE_KEY, "o": OFFSET_KEY, "g": GENERATION_KEY},
    )
    rows: dict[str, str] = {str(key): str(value) for key, value in result}
    return _state(rows.get(MODE_KEY), rows.get(OFFSET_KEY), rows.get(GENERATION_KEY))


def _state(mode: str | None, offset: str | None, generation: str | None) -> SourceState:
    return SourceState(
        mode="xid" if mode == "xid" else "lock",
        xid_offset=int(offset or "0"),
        generation=int(generation or "0"),
    )


# PostgreSQL's parts of the epoch: cluster, timeline, database.
_PG_IDS = (
    "(SELECT system_identifier FROM pg_control_system())",
    "(SELECT timeline_id FROM pg_control_checkpoint())",
    "(SELECT oid FROM pg_database WHERE datname = current_database())",
)


def epoch(session: Session, state: SourceState) -> str:
    if session.get_bind().dialect.name == "postgresql":
        ids = session.execute(text(f"SELECT {', '.join(_PG_IDS)}")).one()
        return _pg_epoch(ids, state)
    return _sqlite_epoch(sqlite_token(session), state)


def _pg_epoch(ids: Sequence[Any], state: SourceState) -> str:
    return f"pg-{ids[0]}-{ids[1]}-{ids[2]}-{state.mode}{state.generation}"


def _sqlite_epoch(token: str, state: SourceState) -> str:
    return f"sqlite-{token}-{state.mode}{state.generation}"


@dataclass(frozen=True)
class Identity:
    """`read_state` and `epoch` as read by `identity_columns` in another statement."""

    state: SourceState
    epoch: str
    sqlite_token: str | None  # the restore detector's token (SQLite)


def identity_columns(postgres: bool) -> list[Any]:
    """What `read_state` and `epoch` read, as columns to add to a statement of the
    caller's (a feed page reads them with its position: round trips were most of a
    small page). `identity` makes them an `Identity`."""
    keys = (MODE_KEY, OFFSET_KEY, GENERATION_KEY) + (() if postgres else (SQLITE_TOKEN_KEY,))
    meta = [
        select(StateHubMeta.value).where(StateHubMeta.key == key).scalar_subquery() for key in keys
    ]
    return meta + [literal_column(part) for part in _PG_IDS] if postgres else meta


def identity(values: Sequence[Any], postgres: bool) -> Identity:
    state = _state(values[0], values[1], values[2])
    if postgres:
        return Identity(state, _pg_epoch(values[3:6], state), None)
    token = values[3] or "unset"
    return Identity(state, _sqlite_epoch(token, state), token)


def _set(session: Session, key: str, value: str) -> None:
    row = session.get(StateHubMeta, key)
    if row is None:
        session.add(StateHubMeta(key=key, value=value))
    else:
        row.value = value


def prepare(db: Database, mode: RevisionMode, *, barrier_timeout_s: float = 60.0) -> SourceState:
    """Install `mode` in the database at startup; a switch bumps the epoch generation.

    Switching keeps revisions monotonic (the `xid` offset starts above every
    revision drawn so far; the sequence jumps above every `xid` revision) and then
    waits until every transaction that began under the old mode has ended, so no
    late commit can land below a watermark already served.
    """
    if db.sqlite:
        if mode != "lock":
            raise ValueError(
                "STATEHUB_REVISION_MODE=xid needs PostgreSQL; SQLite has one writer and uses 'lock'"
            )
        with db.write() as session:
            if session.get(StateHubMeta, SQLITE_TOKEN_KEY) is None:
                session.add(StateHubMeta(key=SQLITE_TOKEN_KEY, value=secrets.token_hex(8)))
            return read_state(session)

    with db.write() as session:
        session.execute(text(f"SELECT pg_advisory_xact_lock({revisions.ADVISORY_LOCK_KEY})"))
        current = read_state(session)
        if current.mode == mode:
            if mode == "xid":
                _install_xid(session, current.xid_offset)
            return current
        max_revision = int(
            session.execute(
                text(
                    "SELECT GREATEST("
                    " (SELECT max(revision) FROM agent_messages),"
                    " (SELECT max(revision) FROM message_receipts),"
                    " (SELECT max(revision) FROM message_tombstones),"
                    " (SELECT max(revision) FROM receipt_tombstones),"
                    " (SELECT last_value FROM inbox_revision_seq), 0)"
                )
            ).scalar_one()
        )
        switch_xid = int(
            session.execute(text("SELECT pg_current_xact_id()::text::bigint")).scalar_one()
        )
        offset = current.xid_offset
        if mode == "xid":
            oldest = int(
                session.execute(
                    text("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")
                ).scalar_one()
            )
            offset = max(0, max_revision + 1 - oldest)
            _install_xid(session, offset)
        else:
            session.execute(text(revisions.PG_REVISION_FUNCTION_LOCK_AT_COMMIT))
            session.execute(text(revisions.PG_STAMP_FUNCTION))
            session.execute(text(revisions.PG_COMMIT_FUNCTION_LOCK))
            floor = max(max_revision, switch_xid + current.xid_offset) + 1
            session.execute(text("SELECT setval('inbox_revision_seq', :v)"), {"v": floor})
        new_state = SourceState(mode=mode, xid_offset=offset, generation=current.generation + 1)
        _set(session, MODE_KEY, mode)
        _set(session, OFFSET_KEY, str(offset))
        _set(session, GENERATION_KEY, str(new_state.generation))
    _wait_for_older_transactions(db, switch_xid, barrier_timeout_s)
    return new_state


def _install_xid(session: Session, offset: int) -> None:
    session.execute(text(revisions.pg_revision_function_xid(offset)))
    session.execute(text(revisions.pg_stamp_function_xid(offset)))
    session.execute(text(revisions.pg_commit_function_xid(offset)))


def _wait_for_older_transactions(db: Database, xid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        with db.read() as session:
            xmin = int(
                session.execute(
                    text("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")
                ).scalar_one()
            )
        if xmin > xid:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(
                "revision-mode switch: transactions older than the switch are still open; "
                "end them (pg_stat_activity) and start State Hub again"
            )
        time.sleep(0.05)


class ServedHighWater:
    """SQLite's restore detector: the highest revision ever served, kept beside
    the database file (`<db>.served`), outside anything a file restore brings back.

    A database whose high water is below what was already served under the same
    epoch token has been restored from an older copy; the token is then rotated,
    so every consumer's epoch check fails and it re-snapshots instead of waiting
    below a high water the source will reuse.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._served: tuple[str, int] | None = None

    def _load(self) -> tuple[str, int] | None:
        if self._served is None:
            try:
                data = json.loads(self.path.read_text())
                self._served = (str(data["token"]), int(data["served"]))
            except (OSError, ValueError, KeyError, TypeError):
                return None
        return self._served

    def restored(self, token: str, high_water: int) -> bool:
        served = self._load()
        return served is not None and served[0] == token and high_water < served[1]

    def record(self, token: str, high_water: int) -> None:
        served = self._load()
        if served is not None and served[0] == token and served[1] >= high_water:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"token": token, "served": high_water}))
        os.replace(tmp, self.path)
        self._served = (token, high_water)


def sqlite_token(session: Session) -> str:
    row = session.get(StateHubMeta, SQLITE_TOKEN_KEY)
    return row.value if row is not None else "unset"


def rotate_sqlite_token(db: Database) -> str:
    token = secrets.token_hex(8)
    with db.write() as session:
        _set(session, SQLITE_TOKEN_KEY, token)
    return token
