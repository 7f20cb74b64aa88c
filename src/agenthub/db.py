"""Database engines for the services that own one (State Hub, hub-core).

Accepts the plain URLs operators write (`sqlite:///path`, `postgresql://…`) and
maps them to the drivers we ship (stdlib sqlite3, psycopg 3). SQLite connections
get WAL, foreign keys and a busy timeout on every connection, because SQLite
forgets all three per connection. `transience` tells a caller whether a failed
database call may simply be tried again.

PostgreSQL connections made through a pooler (pgbouncer) prepare no statements on
the server: psycopg prepares a query after `prepare_threshold` executions, and in
transaction pooling mode the next transaction runs on another server connection that
does not know the name (or already has one by it), so requests fail. A direct
connection keeps them: measured on State Hub, an inbox list took 4.6 ms prepared and
7.5 ms not (docs/postgresql.md). A pooler shows itself at connect: the process id it
reports is its own, not the `pg_backend_pid()` of the server connection behind it.
Everything else a service keeps on a connection is transaction-scoped (advisory locks
`pg_advisory_xact_lock`, `set_config(…, true)`, `SET LOCAL`, isolation in `BEGIN`),
so pooled connections may change server connection per transaction.
"""

from __future__ import annotations

import enum
import os
import sqlite3
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.engine.url import URL
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError
from sqlalchemy.pool import QueuePool

SQLITE_BUSY_TIMEOUT_MS = 30_000


def normalize_url(url: str) -> URL:
    """Turn an operator-written URL into one SQLAlchemy can open with our drivers; a
    `ValueError` says what is wrong with one it cannot."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ValueError(
            f"{url!r} is not a database URL: "
            "use sqlite:///path/to/file.db or postgresql://user@host/dbname"
        ) from None
    backend = parsed.get_backend_name()
    if backend in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    elif backend == "sqlite":
        parsed = parsed.set(drivername="sqlite")
    else:
        raise ValueError(
            f"unsupported database URL scheme {parsed.drivername!r}: "
            "use sqlite:///path/to/file.db or postgresql://user@host/dbname"
        )
    return parsed


class DatabaseUnreachable(Exception):
    """The database cannot be opened (server down, database missing, no permission)."""


def check_reachable(url: str) -> None:
    """Open and close one connection, so a command fails before it announces anything;
    `DatabaseUnreachable` carries the driver's first line."""
    engine = make_engine(url)
    try:
        with engine.connect():
            pass
    except OperationalError as exc:
        first = str(exc.orig or exc).strip().splitlines()[0]
        if "database is locked" in first:
            return  # the file opened; another process (a replica migrating) holds its lock
        raise DatabaseUnreachable(first) from exc
    finally:
        engine.dispose()


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def make_engine(
    url: str, *, pool_size: int | None = None, max_overflow: int | None = None, **kwargs: Any
) -> Engine:
    """Create an engine; for SQLite files also create the parent directory.

    `pool_size` connections are kept open and up to `max_overflow` more are opened
    under load (SQLAlchemy's defaults, 5 and 10, when not given); an in-memory SQLite
    database has a single connection and ignores both."""
    parsed = normalize_url(url)
    if pool_size is not None:
        kwargs["pool_size"] = pool_size
    if max_overflow is not None:
        kwargs["max_overflow"] = max_overflow
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            parent = os.path.dirname(os.path.abspath(database))
            os.makedirs(parent, exist_ok=True)
        in_memory = not database or database == ":memory:" or "mode=memory" in str(parsed)
        if not in_memory:
            # Connections are kept, not opened per request: opening one runs the
            # PRAGMAs below, and closing the last connection of a WAL database
            # checkpoints it; together about a third of a small request.
            kwargs.setdefault("poolclass", QueuePool)
        else:
            kwargs.pop("pool_size", None)
            kwargs.pop("max_overflow", None)
        connect_args = kwargs.pop("connect_args", {})
        connect_args.setdefault("check_same_thread", False)
        # The driver's own wait for a lock, which applies before any PRAGMA runs.
        connect_args.setdefault("timeout", SQLITE_BUSY_TIMEOUT_MS / 1000)
        # Transactions are begun explicitly by the unit of work, so the driver's
        # own implicit BEGIN must not get in the way.
        connect_args.setdefault("isolation_level", None)
        engine = create_engine(parsed, connect_args=connect_args, **kwargs)
        _install_sqlite_pragmas(engine)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    engine = create_engine(parsed, **kwargs)
    if "prepare_threshold" not in kwargs.get("connect_args", {}):  # unless told
        _install_pooler_check(engine)
    return engine


def _install_pooler_check(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        if behind_pooler(dbapi_connection):
            dbapi_connection.prepare_threshold = None


def behind_pooler(dbapi_connection: Any) -> bool:
    """Whether a psycopg connection reaches PostgreSQL through a pooler: the backend
    process id from the connection's start-up is then the pooler's, not the server's."""
    cursor = dbapi_connection.execute("select pg_backend_pid()")
    actual = cursor.fetchone()[0]
    dbapi_connection.rollback()
    return bool(actual != dbapi_connection.info.backend_pid)


def _install_sqlite_pragmas(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        # First, so that switching to WAL also waits for a writer (a replica migrating
        # at start holds the lock for seconds) instead of failing "database is locked".
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        # WAL is a property of the file: set it once. Processes opening a new file at the
        # same moment race to set it, and the loser's switch can fail at once with
        # "database is locked" (no busy wait); the winner's setting holds for both.
        if cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            try:
                cursor.execute("PRAGMA journal_mode=WAL")
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc):
                    raise
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # pysqlite with isolation_level=None never emits BEGIN; we do, so that a
        # SQLAlchemy transaction is a real SQLite transaction. Writers ask for
        # IMMEDIATE via the execution option, so they take the write lock up front
        # instead of failing to upgrade a read lock later (SQLITE_BUSY).
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")


class Transience(enum.Enum):
    """How a failed database call failed, when it failed for a passing reason."""

    # The server undid the transaction (serialization failure, deadlock, connection lost
    # before COMMIT was sent, no connection at all): nothing was applied.
    NOT_APPLIED = "not_applied"
    # The connection died while COMMIT was on the wire: the work may or may not be stored.
    OUTCOME_UNKNOWN = "outcome_unknown"


# SQLSTATE: serialization_failure, deadlock_detected.
_ROLLED_BACK_STATES = frozenset({"40001", "40P01"})
# SQLSTATE classes: connection exception, operator intervention (admin shutdown,
# pg_terminate_backend, crash shutdown, cannot connect now).
_CONNECTION_STATE_CLASSES = ("08", "57P")


def transience(exc: BaseException) -> Transience | None:
    """`None` unless `exc` (or what it was raised from) is a database failure that
    should pass by itself; then whether the failed work could have been applied."""
    seen: BaseException | None = exc
    while seen is not None and not isinstance(seen, DBAPIError):
        seen = seen.__cause__
    if seen is None:
        return None
    state = str(getattr(seen.orig, "sqlstate", "") or "")
    if state in _ROLLED_BACK_STATES:
        return Transience.NOT_APPLIED
    lost = seen.connection_invalidated or state.startswith(_CONNECTION_STATE_CLASSES)
    if lost:
        # SQLAlchemy reports a failed COMMIT with no statement; every other statement of
        # a transaction that had not committed is undone by the server with the session.
        return Transience.OUTCOME_UNKNOWN if seen.statement is None else Transience.NOT_APPLIED
    if seen.statement is None and isinstance(seen, OperationalError):
        # No statement and no lost connection: the connection never opened.
        return Transience.NOT_APPLIED
    if "database is locked" in str(seen.orig):
        # SQLite: the busy timeout ran out waiting for another writer.
        return Transience.NOT_APPLIED
    return None
