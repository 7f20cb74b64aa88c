"""One follower per database: `hubcore follow` and a following `hubcore serve` hold this
for as long as they follow, so a second one on the same database is refused at start
instead of applying every page twice and fighting over the cursor.

PostgreSQL: a transaction advisory lock in a transaction kept open on one connection
(released when it ends or the connection closes, also when the process dies). Not a
session lock: behind a transaction pooler (pgbouncer) a session lock stays on whichever
server connection ran it, which the pooler hands to other clients (where it is
re-entrant) and the unlock may run on another; an open transaction keeps its server
connection until it ends. SQLite file: an exclusive `flock` on `<database>.follow.lock`
beside it (released by the kernel when the process dies). In-memory SQLite is private to
its process and needs none."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

from sqlalchemy import Engine, text

# Beside the migration lock's key (5348490002): another number in the same family.
FOLLOW_LOCK_KEY = 5348490012


class AnotherFollower(RuntimeError):
    """A follower already runs on this database."""

    hint = "stop the other `hubcore follow` (or following `hubcore serve`), or follow into another database"


@contextlib.contextmanager
def sole_follower(engine: Engine) -> Iterator[None]:
    """Hold the follower lock of `engine`'s database; raise `AnotherFollower` if taken."""
    backend = engine.url.get_backend_name()
    if backend == "postgresql":
        with engine.connect() as conn, conn.begin():
            taken = conn.execute(
                text("select pg_try_advisory_xact_lock(:key)"), {"key": FOLLOW_LOCK_KEY}
            ).scalar()
            if not taken:
                raise AnotherFollower(f"another follower is following into {_shown(engine)}")
            yield
        return
    database = engine.url.database or ""
    if backend != "sqlite" or database in ("", ":memory:") or "mode=memory" in str(engine.url):
        yield
        return
    path = os.path.abspath(database) + ".follow.lock"
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AnotherFollower(
                f"another follower is following into {os.path.abspath(database)}"
            ) from None
        yield


def _shown(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=True)
