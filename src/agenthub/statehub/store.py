"""Units of work over the State Hub database: one transaction per service call."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from sqlalchemy import Connection, Engine, text
from sqlalchemy.orm import Session

from agenthub.db import is_sqlite
from agenthub.statehub.revisions import SQLITE_CLOSE, SQLITE_OPEN

SessionHook = Callable[[Session], None]
# Told, inside a write transaction, what that write made (`Database.made`).
MadeHook = Callable[[Session, object], None]


class Database:
    """Hands out sessions bound to one transaction.

    `write()` takes SQLite's write lock up front (BEGIN IMMEDIATE) so a
    read-then-write transaction never dies on a lock upgrade; `before_write`
    and `before_commit` hooks let the revision machinery run inside every
    write transaction.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.sqlite = is_sqlite(engine)
        self.before_write: list[SessionHook] = []
        self.before_commit: list[SessionHook] = []
        self.after_commit: list[Callable[[], None]] = []
        # Something a `before_write` hook must do in this request's transaction (an
        # Idempotency-Key claim): `statement()` then takes the full `write()` path.
        self.transaction_required: list[Callable[[], bool]] = []
        self.on_made: list[MadeHook] = []
        if self.sqlite:
            # One revision per State Hub transaction (see `revisions`).
            self.before_write.append(_run(SQLITE_OPEN))
            self.before_commit.append(_run(SQLITE_CLOSE))

    @contextmanager
    def write(self) -> Iterator[Session]:
        with self._transaction(self.before_write, self.before_commit) as session:
            yield session

    def made(self, session: Session, result: object) -> None:
        """Report, before the commit, what this write transaction made (the object its
        service call returns), so what depends on it commits with it (the answer kept
        for an Idempotency-Key)."""
        for hook in self.on_made:
            hook(session, result)

    @contextmanager
    def statement(self) -> Iterator[Session]:
        """A write of one row (the caller issues exactly one INSERT or UPDATE of one row).

        On PostgreSQL it runs in autocommit, so the statement is its own
        transaction, triggers and advisory lock included: one round trip instead
        of BEGIN, statement, COMMIT. On SQLite it is a transaction without the
        revision row opened and closed around it: a closed row draws a revision
        per row written, so one row still gets its transaction's one revision, and
        the two UPDATEs of the row were half of a send's statements.
        """
        if any(required() for required in self.transaction_required):
            with self.write() as session:
                yield session
            return
        if self.sqlite:
            with self._transaction((), ()) as session:
                yield session
            return
        with (
            self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn,
            Session(bind=conn, expire_on_commit=False) as session,
        ):
            yield session
            session.flush()
            session.commit()
        for callback in self.after_commit:
            callback()

    @contextmanager
    def _transaction(
        self, before_write: Sequence[SessionHook], before_commit: Sequence[SessionHook]
    ) -> Iterator[Session]:
        with self.engine.connect() as conn:
            if self.sqlite:
                conn.execution_options(sqlite_begin="IMMEDIATE")
            with Session(bind=conn, expire_on_commit=False) as session, session.begin():
                for hook in before_write:
                    hook(session)
                yield session
                session.flush()
                for hook in before_commit:
                    hook(session)
        for callback in self.after_commit:
            callback()

    @contextmanager
    def snapshot(self) -> Iterator[Session]:
        """One consistent read-only image: REPEATABLE READ READ ONLY on PostgreSQL,
        a single read transaction (WAL snapshot) on SQLite."""
        with self.engine.connect() as conn:
            if not self.sqlite:
                conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
            with Session(bind=conn, expire_on_commit=False) as session, session.begin():
                yield session

    @contextmanager
    def read(self) -> Iterator[Session]:
        """Reads. On PostgreSQL in autocommit: under READ COMMITTED every statement
        takes its own snapshot inside a transaction too, so BEGIN and COMMIT were
        two round trips that bought nothing. On SQLite one read transaction (one
        WAL snapshot for all its statements)."""
        with self.engine.connect() as conn:
            if not self.sqlite:
                conn.execution_options(isolation_level="AUTOCOMMIT")
            with Session(bind=conn, expire_on_commit=False) as session, session.begin():
                yield session

    @contextmanager
    def read_rows(self) -> Iterator[Connection]:
        """`read()` without an ORM session, for reads that select columns, not
        objects (the session's execution path was a twentieth of an unread read)."""
        with self.engine.connect() as conn:
            if not self.sqlite:
                conn.execution_options(isolation_level="AUTOCOMMIT")
            with conn.begin():
                yield conn


def _run(statement: str) -> SessionHook:
    def hook(session: Session) -> None:
        session.execute(text(statement))

    return hook
