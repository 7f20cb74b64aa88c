"""Bulk loads inside the caller's transaction: `COPY FROM STDIN` on PostgreSQL, one
`executemany` on SQLite.

Both go through the session's own DBAPI connection, so the rows commit or roll back
with everything else the transaction does. Values must already be in the form the
driver stores (text, int, `None`); SQLAlchemy's type processing is bypassed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy.orm import Session


def _driver(session: Session) -> Any:
    return session.connection().connection.driver_connection


def load(
    session: Session,
    table: str,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    placeholders: Sequence[str] | None = None,
) -> None:
    """Append `rows` (tuples in `columns` order) to `table`. On SQLite `placeholders`
    (SQL binding `?1`, `?2`, … in `columns` order) may convert the values as they are
    inserted; COPY stores them as given."""
    names = ", ".join(columns)
    driver = _driver(session)
    if session.get_bind().dialect.name == "postgresql":
        with driver.cursor() as cur, cur.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
    else:
        marks = ", ".join(placeholders or "?" * len(columns))
        driver.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)
