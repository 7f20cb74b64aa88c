"""Units of work over the hub-core database: import writes, and read-only reads."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from agenthub.db import is_sqlite


class Database:
    """Hands out sessions bound to one transaction.

    `write()` takes SQLite's write lock up front (BEGIN IMMEDIATE) so two
    importers serialize; `read_only()` is a transaction the database itself
    refuses to write in and that sees one snapshot (`REPEATABLE READ, READ ONLY`,
    or SQLite's query_only inside a WAL read transaction).
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.sqlite = is_sqlite(engine)

    @contextmanager
    def write(self) -> Iterator[Session]:
        with self.engine.connect() as conn:
            if self.sqlite:
                conn = conn.execution_options(sqlite_begin="IMMEDIATE")
            with Session(bind=conn, expire_on_commit=False) as session, session.begin():
                yield session

    @contextmanager
    def scratch(self) -> Iterator[Session]:
        """A write transaction that never commits: room for a check that needs to write
        (a streamed bundle's validation loads its rows), rolled back whatever happens."""
        with self.engine.connect() as conn:
            if self.sqlite:
                conn = conn.execution_options(sqlite_begin="IMMEDIATE")
            with Session(bind=conn, expire_on_commit=False) as session:
                session.begin()
                try:
                    yield session
                finally:
                    session.rollback()

    @contextmanager
    def read_only(self) -> Iterator[Session]:
        with self.engine.connect() as conn:
            try:
                with Session(bind=conn, expire_on_commit=False) as session, session.begin():
                    if self.sqlite:
                        session.execute(text("PRAGMA query_only = ON"))
                    else:
                        # One snapshot for every statement of the read, like SQLite's WAL read.
                        session.execute(
                            text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                        )
                    yield session
            finally:
                if self.sqlite:
                    # The pragma outlives the transaction; the connection may be reused.
                    raw = conn.connection.dbapi_connection
                    assert raw is not None
                    raw.execute("PRAGMA query_only = OFF")
