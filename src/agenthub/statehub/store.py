"""Units of work over the State Hub database: one transaction per service call."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from agenthub.db import is_sqlite

SessionHook = Callable[[Session], None]


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

    @contextmanager
    def write(self) -> Iterator[Session]:
        with self.engine.connect() as conn:
            if self.sqlite:
                conn.execution_options(sqlite_begin="IMMEDIATE")
            with Session(bind=conn, expire_on_commit=False) as session, session.begin():
                for hook in self.before_write:
                    hook(session)
                yield session
                session.flush()
                for hook in self.before_commit:
                    hook(session)

    @contextmanager
    def read(self) -> Iterator[Session]:
        with (
            self.engine.connect() as conn,
            Session(bind=conn, expire_on_commit=False) as session,
            session.begin(),
        ):
            yield session
